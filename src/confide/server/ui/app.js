// Confide's review page: plain JavaScript over the /v1 REST routes, served by the app itself.
// The API key stays in this page's memory and travels only in the Authorization header; memory
// values travel only in JSON bodies and are shown with textContent, never in a URL.
"use strict";

// Memories a page shows, listed or searched.
const PAGE_SIZE = 20;
// The most results a search asks for (the /v1/search maximum); they are paged here.
const SEARCH_TOP_K = 100;

const state = {
  key: null,
  user: null,
  mode: "list", // "list": newest first, paged by the server; "search": ranked, paged here
  page: 0,
  hits: [], // the last search's results, best first: { memory, score }
  selected: null, // the id of the memory whose history the panel shows
};
const $ = (id) => document.getElementById(id);

const EVENT_NAMES = {
  ADD: "Added",
  UPDATE: "Edited",
  DELETE: "Forgotten",
  RESTORE: "Restored",
  MERGE: "Merged",
  LINK: "Linked",
  TTL: "Expired",
  PURGE: "Purged",
  PRIVACY: "Visibility changed",
  PROPOSAL: "Proposal",
};

function say(message, error = false) {
  const status = $("status");
  status.textContent = message;
  status.className = error ? "error" : "";
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    throw new Error((data && data.error) || `HTTP ${response.status}`);
  }
  return data;
}

function segment(id) {
  return encodeURIComponent(id);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(label, className, onClick) {
  const node = element("button", className, label);
  node.type = "button";
  node.addEventListener("click", () => onClick().catch((err) => say(err.message, true)));
  return node;
}

function when(ts) {
  return new Date(ts).toLocaleString();
}

async function signIn(event) {
  event.preventDefault();
  state.key = $("api-key").value.trim();
  try {
    const account = await api("GET", "/v1/account");
    $("api-key").value = "";
    $("sign-in").hidden = true;
    $("review").hidden = false;
    $("who").hidden = false;
    $("sign-out").hidden = false;
    $("who").textContent = `account ${account.account_id}`;
    await loadUsers();
    say("Signed in.");
  } catch (err) {
    state.key = null;
    say(`Sign-in failed: ${err.message}`, true);
  }
}

function signOut() {
  Object.assign(state, { key: null, user: null, mode: "list", page: 0, hits: [], selected: null });
  // Nothing read under the key stays in the page.
  closeHistory();
  for (const id of ["memories", "proposals", "user-select"]) $(id).replaceChildren();
  $("query").value = "";
  $("review").hidden = true;
  $("browse").hidden = true;
  $("sign-in").hidden = false;
  $("who").hidden = true;
  $("sign-out").hidden = true;
  say("Signed out.");
}

async function loadUsers() {
  // The account's users; apps' internal owners (app:<id>) are never listed by /v1/users.
  const data = await api("GET", "/v1/users");
  const select = $("user-select");
  select.replaceChildren();
  for (const user of data.users) {
    const option = element("option", "", user);
    option.value = user;
    select.append(option);
  }
}

async function pickUser() {
  const typed = $("user-id").value.trim();
  state.user = typed || $("user-select").value;
  if (!state.user) {
    say("Pick or type a user id.", true);
    return;
  }
  $("current-user").textContent = state.user;
  $("browse").hidden = false;
  $("export").disabled = false;
  $("query").value = "";
  closeHistory();
  await listMemories();
  await loadProposals();
}

function memoryCard(memory, score) {
  const item = element("li", `memory ${memory.state}`);
  item.dataset.id = memory.id;
  item.dataset.key = memory.key;
  if (score !== undefined) item.dataset.score = String(score);
  if (memory.id === state.selected) item.classList.add("selected");

  const head = element("div", "card-head");
  head.append(element("span", "label", memory.label || memory.key));
  head.append(element("span", "key", memory.key));
  item.append(head);
  item.append(element("p", "value", memory.value));

  const meta = element("div", "meta");
  const badges = [memory.type, memory.visibility, `v${memory.version}`];
  if (memory.state !== "active") badges.unshift(memory.state === "soft_deleted" ? "forgotten" : memory.state);
  for (const badge of badges) meta.append(element("span", `badge ${badge}`, badge));
  meta.append(element("span", "updated", `updated ${when(memory.updated_at)}`));
  if (score !== undefined) meta.append(element("span", "score", `score ${score.toFixed(3)}`));
  item.append(meta);

  const actions = element("div", "actions");
  actions.append(button("History", "history", () => showHistory(memory)));
  if (memory.state === "active") {
    actions.append(button("Edit", "edit", async () => startEdit(item, memory)));
    actions.append(button("Forget", "forget", () => forget(memory)));
    const next = memory.visibility === "private" ? "shared" : "private";
    actions.append(button(`Make ${next}`, "visibility", () => setVisibility(memory, next)));
  } else {
    actions.append(button("Restore", "restore", () => restore(memory)));
  }
  item.append(actions);
  return item;
}

function renderMemories(memories, scores) {
  const list = $("memories");
  list.replaceChildren();
  memories.forEach((memory, index) => {
    list.append(memoryCard(memory, scores ? scores[index] : undefined));
  });
  if (!memories.length) list.append(element("li", "empty", "No memories."));
}

function renderPager(hasNext, info) {
  $("pager").hidden = state.page === 0 && !hasNext;
  $("prev").disabled = state.page === 0;
  $("next").disabled = !hasNext;
  $("page-info").textContent = info;
}

async function listMemories(page = 0) {
  state.mode = "list";
  state.page = page;
  $("weak-note").hidden = true;
  const forgotten = $("show-forgotten").checked ? "&include_forgotten=true" : "";
  // One more than a page, to know whether a next page exists.
  const data = await api(
    "GET",
    `/v1/memories?user_id=${segment(state.user)}&limit=${PAGE_SIZE + 1}` +
      `&offset=${page * PAGE_SIZE}${forgotten}`,
  );
  const hasNext = data.memories.length > PAGE_SIZE;
  const memories = data.memories.slice(0, PAGE_SIZE);
  renderMemories(memories);
  const first = page * PAGE_SIZE + 1;
  const range = memories.length ? `${first}–${first + memories.length - 1}` : "none";
  renderPager(hasNext, `Page ${page + 1} · memories ${range}`);
  if (!memories.length) say("No memories.");
  else say(`Memories ${range}${hasNext ? ", more on the next page" : ""}.`);
}

// The relevance cut-off: a search result scoring below this share of the best result's
// score is hidden (scores are relative to the query, so a fixed number would not do).
function cutoff() {
  return Number($("cutoff").value);
}

function renderSearch(page) {
  const best = state.hits.length ? state.hits[0].score : 0;
  // A cut-off of 0 ("Show them") keeps every result: a weak match can score below zero.
  const share = cutoff();
  const kept = share > 0 ? state.hits.filter((hit) => hit.score >= best * share) : state.hits;
  const hidden = state.hits.length - kept.length;
  const pages = Math.max(1, Math.ceil(kept.length / PAGE_SIZE));
  state.page = Math.min(page, pages - 1);
  const shown = kept.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  renderMemories(
    shown.map((hit) => hit.memory),
    shown.map((hit) => hit.score),
  );
  renderPager(state.page < pages - 1, `Page ${state.page + 1} of ${pages}`);
  $("weak-note").hidden = hidden === 0;
  $("weak-count").textContent =
    `${hidden} weaker ${hidden === 1 ? "match" : "matches"} below the cut-off hidden.`;
  const results = `${kept.length} ${kept.length === 1 ? "result" : "results"}`;
  say(`${results}${hidden ? `, ${hidden} below the cut-off hidden` : ""}.`);
}

async function runSearch(page = 0) {
  const query = $("query").value.trim();
  if (!query) return listMemories();
  const data = await api("POST", "/v1/search", {
    query,
    user_id: state.user,
    top_k: SEARCH_TOP_K,
  });
  state.mode = "search";
  state.hits = data.results.map((r) => ({ memory: r.memory, score: r.score }));
  renderSearch(page);
}

async function search(event) {
  event.preventDefault();
  await runSearch();
}

async function turnPage(step) {
  if (state.mode === "search") renderSearch(state.page + step);
  else await listMemories(state.page + step);
  $("list-column").scrollIntoView({ block: "start" });
}

// What the list shows again after a change: the same search, or the same page.
async function refresh() {
  if (state.mode === "search") await runSearch(state.page);
  else await listMemories(state.page);
}

function select(memoryId) {
  state.selected = memoryId;
  for (const card of document.querySelectorAll("li.memory")) {
    card.classList.toggle("selected", card.dataset.id === memoryId);
  }
}

function closeHistory() {
  state.selected = null;
  select(null);
  $("history-panel").hidden = true;
  $("history").replaceChildren();
  $("history-of").textContent = "";
}

// The values of the versions an event names, by id (null: no longer stored, e.g. purged).
async function versions(events) {
  const ids = new Set();
  for (const event of events) {
    if (event.old_ref) ids.add(event.old_ref);
    if (event.new_ref) ids.add(event.new_ref);
    if (event.event === "LINK" && event.meta && event.meta.related_id) {
      ids.add(event.meta.related_id);
    }
  }
  const found = new Map();
  await Promise.all(
    [...ids].map(async (id) => {
      try {
        found.set(id, await api("GET", `/v1/memories/${segment(id)}`));
      } catch {
        found.set(id, null);
      }
    }),
  );
  return found;
}

function valueOf(found, ref) {
  const version = ref ? found.get(ref) : undefined;
  return version ? version.value : null;
}

function historyEntry(event, found) {
  const item = element("li", "event");
  item.dataset.event = event.event;
  const head = element("div", "event-head");
  let name = EVENT_NAMES[event.event] || event.event;
  if (event.event === "PRIVACY" && event.meta && event.meta.visibility) {
    name = `Made ${event.meta.visibility}`;
  }
  if (event.event === "PROPOSAL" && event.meta && event.meta.decision) {
    name = `Proposal ${event.meta.decision}`;
  }
  head.append(element("span", "event-kind", name), document.createTextNode(" by "));
  head.append(element("span", event.actor ? "actor" : "actor unknown", event.actor || "(not recorded)"));
  head.append(element("time", "when", when(event.ts)));
  item.append(head);

  const change = element("div", "change");
  const before = valueOf(found, event.old_ref);
  const after = valueOf(found, event.new_ref);
  const gone = "(value no longer stored)";
  if (event.event === "ADD") {
    change.append(element("span", "new", after ?? gone));
  } else if (event.event === "LINK" && event.meta && event.meta.related_id) {
    const { relation, strength } = event.meta;
    const words = String(relation || "related_to").replaceAll("_", " ");
    change.append(element("span", "relation", `${words} `));
    change.append(element("span", "related", valueOf(found, event.meta.related_id) ?? gone));
    if (typeof strength === "number") {
      change.append(element("span", "strength", ` (similarity ${strength.toFixed(2)})`));
    }
  } else if (event.old_ref && event.new_ref && event.old_ref !== event.new_ref) {
    change.append(element("span", "old", before ?? gone));
    change.append(element("span", "arrow", " → "));
    change.append(element("span", "new", after ?? gone));
    const fields = (event.meta && event.meta.fields) || [];
    const others = fields.filter((f) => f !== "value");
    if (others.length) change.append(element("span", "fields", ` (also changed: ${others.join(", ")})`));
  } else {
    change.append(element("span", "same", after ?? before ?? gone));
  }
  item.append(change);
  return item;
}

async function showHistory(memory) {
  const data = await api("GET", `/v1/memories/${segment(memory.id)}/history`);
  const found = await versions(data.history);
  select(memory.id);
  $("history-of").textContent = `of ${memory.label || memory.key}`;
  const list = $("history");
  list.replaceChildren(...data.history.map((event) => historyEntry(event, found)));
  const panel = $("history-panel");
  panel.hidden = false;
  // Beside the list on a wide window (the panel sticks in view), above the proposals on a
  // narrow one: either way brought into view, so the click visibly did something.
  panel.scrollIntoView({ block: "nearest" });
  panel.focus({ preventScroll: true });
  const count = data.history.length;
  say(`${count} ${count === 1 ? "event" : "events"}.`);
}

function startEdit(item, memory) {
  if (item.querySelector("textarea.edit-value")) return;
  const editor = element("textarea", "edit-value");
  editor.value = memory.value;
  editor.rows = 3;
  const save = button("Save", "save primary", async () => {
    const value = editor.value.trim();
    if (!value) throw new Error("A value cannot be empty.");
    await api("PATCH", `/v1/memories/${segment(memory.id)}`, { value });
    await refresh();
    say("Saved as a new version.");
  });
  const cancel = button("Cancel", "cancel quiet", async () => {
    editor.remove();
    save.remove();
    cancel.remove();
  });
  item.append(editor, save, cancel);
  editor.focus();
}

async function forget(memory) {
  await api("DELETE", `/v1/memories/${segment(memory.id)}`);
  // Forgotten memories are listed (restorable), not searched: show them in the list.
  $("show-forgotten").checked = true;
  await listMemories(state.mode === "list" ? state.page : 0);
  say("Forgotten (it can be restored).");
}

async function restore(memory) {
  await api("POST", `/v1/memories/${segment(memory.id)}/restore`);
  await refresh();
  say("Restored.");
}

async function setVisibility(memory, visibility) {
  await api("PATCH", `/v1/memories/${segment(memory.id)}`, { visibility });
  await refresh();
  say(`Now ${visibility}.`);
}

async function loadProposals() {
  const data = await api("GET", `/v1/proposals?user_id=${segment(state.user)}`);
  const list = $("proposals");
  list.replaceChildren();
  $("proposal-count").textContent = data.proposals.length ? `(${data.proposals.length})` : "";
  for (const proposal of data.proposals) {
    const item = element("li", "proposal");
    item.dataset.id = proposal.id;
    const head = element("div", "card-head");
    head.append(element("span", "label", proposal.label || proposal.key));
    head.append(element("span", "key", proposal.key));
    item.append(head);
    const change = element("div", "change");
    change.append(element("span", "current", proposal.current_value ?? "(none)"));
    change.append(element("span", "arrow", " → "));
    change.append(element("span", "proposed", proposal.proposed_value));
    item.append(change);
    const actions = element("div", "actions");
    actions.append(
      button("Confirm", "confirm primary", async () => {
        await api("POST", `/v1/proposals/${segment(proposal.id)}/confirm`);
        await refresh();
        await loadProposals();
        say("Confirmed.");
      }),
      button("Reject", "reject", async () => {
        await api("POST", `/v1/proposals/${segment(proposal.id)}/reject`);
        await loadProposals();
        say("Rejected.");
      }),
    );
    item.append(actions);
    list.append(item);
  }
  if (!data.proposals.length) list.append(element("li", "empty", "No pending proposals."));
}

async function exportUser() {
  const data = await api("GET", `/v1/users/${segment(state.user)}/export`);
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const link = element("a");
  link.href = URL.createObjectURL(blob);
  link.download = `confide-export-${state.user}.json`;
  link.id = "export-link";
  document.body.append(link);
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
  say(`Exported ${(data.memories || []).length} memories.`);
}

function guard(fn) {
  return (event) => fn(event).catch((err) => say(err.message, true));
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  $("pick-user").addEventListener("click", guard(pickUser));
  $("search-form").addEventListener("submit", guard(search));
  $("list").addEventListener(
    "click",
    guard(() => {
      $("query").value = "";
      return listMemories();
    }),
  );
  $("show-forgotten").addEventListener("change", guard(() => listMemories()));
  $("cutoff").addEventListener("change", () => {
    if (state.mode === "search") renderSearch(0);
  });
  $("show-weak").addEventListener("click", () => {
    $("cutoff").value = "0";
    renderSearch(0);
  });
  $("prev").addEventListener("click", guard(() => turnPage(-1)));
  $("next").addEventListener("click", guard(() => turnPage(1)));
  $("close-history").addEventListener("click", closeHistory);
  $("export").addEventListener("click", guard(exportUser));
});
