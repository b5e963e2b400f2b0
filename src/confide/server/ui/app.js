// Confide's review page: plain JavaScript over the /v1 REST routes, served by the app itself.
// The API key stays in this page's memory and travels only in the Authorization header; memory
// values travel only in JSON bodies and are shown with textContent, never in a URL.
"use strict";

const state = { key: null, user: null };
const $ = (id) => document.getElementById(id);

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
  state.key = null;
  state.user = null;
  $("review").hidden = true;
  $("browse").hidden = true;
  $("sign-in").hidden = false;
  $("who").hidden = true;
  $("sign-out").hidden = true;
  say("Signed out.");
}

async function loadUsers() {
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
  $("history").replaceChildren();
  $("history-of").textContent = "";
  await listMemories();
  await loadProposals();
}

function renderMemories(memories, scores) {
  const list = $("memories");
  list.replaceChildren();
  memories.forEach((memory, index) => {
    const item = element("li", `memory ${memory.state}`);
    item.dataset.id = memory.id;
    item.dataset.key = memory.key;
    item.append(element("span", "key", memory.key), document.createTextNode(": "));
    item.append(element("span", "value", memory.value));
    const meta = [memory.type, memory.visibility, memory.state, `v${memory.version}`];
    if (scores) meta.push(`score ${scores[index].toFixed(3)}`);
    item.append(element("div", "meta", meta.join(" · ")));
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
    list.append(item);
  });
  if (!memories.length) list.append(element("li", "empty", "No memories."));
}

async function listMemories() {
  const forgotten = $("show-forgotten").checked ? "&include_forgotten=true" : "";
  const data = await api(
    "GET",
    `/v1/memories?user_id=${segment(state.user)}&limit=200${forgotten}`,
  );
  renderMemories(data.memories);
  say(`${data.memories.length} memories.`);
}

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return listMemories();
  const data = await api("POST", "/v1/search", { query, user_id: state.user, top_k: 20 });
  renderMemories(
    data.results.map((r) => r.memory),
    data.results.map((r) => r.score),
  );
  say(`${data.results.length} results.`);
}

async function showHistory(memory) {
  const data = await api("GET", `/v1/memories/${segment(memory.id)}/history`);
  $("history-of").textContent = `of ${memory.key}`;
  const list = $("history");
  list.replaceChildren();
  for (const event of data.history) {
    const when = new Date(event.ts).toLocaleString();
    list.append(element("li", "event", `${when} — ${event.event} by ${event.actor || "?"}`));
  }
  say(`${data.history.length} events.`);
}

function startEdit(item, memory) {
  const editor = element("textarea", "edit-value");
  editor.value = memory.value;
  const save = button("Save", "save", async () => {
    const value = editor.value.trim();
    if (!value) throw new Error("A value cannot be empty.");
    await api("PATCH", `/v1/memories/${segment(memory.id)}`, { value });
    await listMemories();
    say("Saved as a new version.");
  });
  item.append(editor, save);
  editor.focus();
}

async function forget(memory) {
  await api("DELETE", `/v1/memories/${segment(memory.id)}`);
  $("show-forgotten").checked = true;
  await listMemories();
  say("Forgotten (it can be restored).");
}

async function restore(memory) {
  await api("POST", `/v1/memories/${segment(memory.id)}/restore`);
  await listMemories();
  say("Restored.");
}

async function setVisibility(memory, visibility) {
  await api("PATCH", `/v1/memories/${segment(memory.id)}`, { visibility });
  await listMemories();
  say(`Now ${visibility}.`);
}

async function loadProposals() {
  const data = await api("GET", `/v1/proposals?user_id=${segment(state.user)}`);
  const list = $("proposals");
  list.replaceChildren();
  for (const proposal of data.proposals) {
    const item = element("li", "proposal");
    item.dataset.id = proposal.id;
    item.append(element("span", "key", proposal.key), document.createTextNode(": "));
    item.append(element("span", "current", proposal.current_value ?? "(none)"));
    item.append(document.createTextNode(" → "));
    item.append(element("span", "proposed", proposal.proposed_value));
    item.append(
      button("Confirm", "confirm", async () => {
        await api("POST", `/v1/proposals/${segment(proposal.id)}/confirm`);
        await pickUser();
        say("Confirmed.");
      }),
      button("Reject", "reject", async () => {
        await api("POST", `/v1/proposals/${segment(proposal.id)}/reject`);
        await loadProposals();
        say("Rejected.");
      }),
    );
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
  $("list").addEventListener("click", guard(listMemories));
  $("show-forgotten").addEventListener("change", guard(listMemories));
  $("export").addEventListener("click", guard(exportUser));
});
