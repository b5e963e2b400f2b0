"""The gate: the rules every door's calls pass, enforced once.

Doors (REST routes, the tool routes, the Realtime socket, MCP over stdio and HTTP) turn
their credentials into a :class:`~confide.gate.principal.Principal` and call the gate; the
gate decides what that principal may do and then runs the operation:

- **Scope.** A ``read`` principal changes nothing: the write tools (``store_memory``,
  ``update_memory``, ``forget_memory``, ``mark_private``), a call session (it ends in an
  extraction) and every write by id are refused with :class:`PermissionDeniedError`.
- **Agents.** ``memory_query``, a chat's history, a call's instructions and the reads of a
  user's memories for an agent (:meth:`Gate.agent_view`, by key or listed) act as an agent
  the principal is bound to, and so carry only the categories of that agent's allowlist.
- **App memories** (owner ``app:<app_id>``, injected into that app's system prompt) are read
  and changed by ``admin`` principals only, whichever operation names their ids.
- **Subject facts** are shared and unshared by their owner only, through the chat memory's
  fact operations (which name the acting user); a change of visibility by id is refused.
- **Stale versions.** An update naming a version that a newer one superseded is a
  :class:`ConflictError` (read the memory again), with or without an expected row version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from confide.apps import AppMemories, AppSettings
from confide.chat import (
    ChatMemory,
    ConversationHistory,
    MemoryContext,
    MessagePage,
    SavedMessage,
)
from confide.chat.facts import FACT_MEMORY_CATEGORY
from confide.chat.prompt import Delivery
from confide.chat.types import SubjectFact
from confide.conversation.dispatcher import EngineDispatcher, Owner
from confide.conversation.proposals import Proposal, ProposalStore
from confide.conversation.tools import MemoryQueryArgs, parse_arguments
from confide.engine import MemoryEngine
from confide.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
)
from confide.gate.principal import Principal
from confide.llm.candidates import Candidate
from confide.llm.key_vocabulary import to_vocabulary
from confide.retrieval.categories import CategoriesConfig
from confide.retrieval.memory_query import split_user
from confide.types import (
    APP_OWNER_PREFIX,
    ErasureReceipt,
    HistoryEvent,
    Memory,
    MemoryFilter,
    MemoryState,
    MemoryType,
    ScrubReport,
    Source,
    owner_app_id,
    validated,
)

__all__ = ["WRITE_TOOLS", "Gate", "next_note_key"]

WRITE_TOOLS = frozenset({"store_memory", "update_memory", "forget_memory", "mark_private"})
"""The memory tools that change something (a ``read`` principal may call none of them)."""


def require_write(principal: Principal, action: str) -> None:
    """Refuse ``action`` to a principal that may only read.

    Raises:
        PermissionDeniedError: the principal has the ``read`` scope.
    """
    if not principal.may_write:
        raise PermissionDeniedError(f"{action} needs an API key with the service scope")


def require_admin(principal: Principal, action: str) -> None:
    """Refuse ``action`` to a principal without the ``admin`` scope.

    Raises:
        PermissionDeniedError: the principal is not an admin.
    """
    if not principal.is_admin:
        raise PermissionDeniedError(f"{action} needs an API key with the admin scope")


_MAX_KEYS = 5000
_TYPE_NAMES = frozenset(t.value for t in MemoryType)


def next_note_key(
    engine: MemoryEngine, *, account_id: str, user_id: str, memory_type: MemoryType, value: str
) -> str:
    """The key a memory stored without one gets, on every door: the user's next free
    ``note`` key (``note``, ``note.2``, ...)."""
    # Validated here, before the memory is: an id the filter refuses (empty, too long) is
    # the caller's mistake, refused as a ValidationError naming the field.
    owner = validated(MemoryFilter, {"account_id": account_id, "user_id": user_id})
    taken = {m.key.lower() for m in engine.list_memories(owner, limit=_MAX_KEYS)}
    return to_vocabulary(Candidate(type=memory_type, key="note", value=value), taken).key


def _check_owner(principal: Principal, owner: str) -> None:
    """App memories belong to the app's admin API."""
    if owner.startswith(APP_OWNER_PREFIX):
        require_admin(principal, "app memories")


class Gate:
    """The operations every door calls, under one principal each.

    Args:
        engine: the memory engine.
        dispatcher: runs the memory tools once the gate has let a call through.
        categories: the categories and agent allowlists.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        dispatcher: EngineDispatcher,
        categories: CategoriesConfig,
        *,
        chat: ChatMemory | None = None,
        apps: AppMemories | None = None,
        proposals: ProposalStore | None = None,
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.categories = categories
        self._chat = chat
        self._apps = apps
        self._proposals = proposals

    @property
    def chat(self) -> ChatMemory:
        """The chat memory the conversation operations run on."""
        if self._chat is None:
            raise ConfigurationError("this gate was built without a chat memory")
        return self._chat

    @property
    def apps(self) -> AppMemories:
        """The app memories the app operations run on."""
        if self._apps is None:
            raise ConfigurationError("this gate was built without app memories")
        return self._apps

    @property
    def proposals(self) -> ProposalStore:
        """The consent queue the proposal operations run on."""
        if self._proposals is None:
            raise ConfigurationError("this gate was built without a consent queue")
        return self._proposals

    # ---- agents ---------------------------------------------------------------------------
    def readable(self, principal: Principal, agent: str | None = None) -> tuple[str, ...]:
        """The memory categories that reach ``agent`` (or the principal's first agent)
        unasked: its allowlist, less the categories only an explicit request reads.

        Raises:
            PermissionDeniedError: an agent the principal is not bound to, or one without an
                allowlist.
        """
        return self.categories.resolve(principal.agent_for(agent))

    def agent_view(
        self, principal: Principal, *, user_id: str | None, agent: str | None = None
    ) -> MemoryFilter:
        """What a read of a user's memories that feeds ``agent`` may see: the principal's
        account, the acting user (:meth:`user`; an app's owner reads that app's scope), and
        the categories that reach the agent (:meth:`readable`).

        Raises:
            PermissionDeniedError: another user than the pinned one, an app's owner for a
                non-admin principal, an agent the principal is not bound to or one without
                an allowlist.
            ValidationError: no user at all.
        """
        user = self.user(principal, user_id)
        return MemoryFilter(
            account_id=principal.account_id,
            user_id=user,
            app_id=owner_app_id(user),
            categories=self.readable(principal, agent),
        )

    def memories_for(
        self, principal: Principal, *, user_id: str | None, agent: str | None = None, limit: int
    ) -> list[Memory]:
        """A user's active memories that reach ``agent`` (:meth:`agent_view`), newest first.

        Raises:
            PermissionDeniedError: as :meth:`agent_view`.
            ValidationError: no user; ``limit`` out of range.
        """
        return self.engine.list_memories(
            self.agent_view(principal, user_id=user_id, agent=agent), limit=limit
        )

    def memory_by_key(
        self, principal: Principal, *, user_id: str | None, key: str, agent: str | None = None
    ) -> Memory | None:
        """A user's active memory stored under ``key``, when its category reaches ``agent``;
        ``None`` otherwise, as when there is none.

        Raises:
            PermissionDeniedError: as :meth:`agent_view`.
            ValidationError: no user.
        """
        view = self.agent_view(principal, user_id=user_id, agent=agent)
        memory = self.engine.get_by_key(
            account_id=view.account_id, user_id=str(view.user_id), key=key
        )
        if memory is None or memory.category not in (view.categories or ()):
            return None
        return memory

    # ---- memory tools ---------------------------------------------------------------------
    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: BaseModel | Mapping[str, Any] | str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Run memory tool ``name`` for ``principal`` on ``user_id`` (or the pinned user);
        ``memory_query`` may name its user in ``filters.user_id`` instead, or as well.

        ``arguments`` are the tool's validated arguments, or its raw JSON arguments (a
        mapping or text, either spelling) to validate here, by
        :func:`~confide.conversation.tools.parse_arguments`: every door's tool errors come
        from there.

        Raises:
            PermissionDeniedError: a write tool for a ``read`` principal, an agent the
                principal is not bound to, another user than the pinned one.
            ValidationError: an unknown tool, invalid arguments, no user, or a
                ``filters.user_id`` naming another user than ``user_id``.
        """
        if name in WRITE_TOOLS:
            require_write(principal, name)
        args = arguments if isinstance(arguments, BaseModel) else parse_arguments(name, arguments)
        if isinstance(args, MemoryQueryArgs):
            # The user may be named in the filters too (``filters.user_id``): the same one
            # as the call's (named, or pinned to the principal).
            named = user_id if user_id is not None else principal.user_id
            user_id, filters = split_user(named, args.filters)
            args = args.model_copy(
                update={"agent": principal.agent_for(args.agent), "filters": filters}
            )
        owner = Owner(principal.account_id, self.user(principal, user_id), session_id)
        return await self.dispatcher.call(name, args, owner=owner)

    @staticmethod
    def user(principal: Principal, requested: str | None) -> str:
        """The user a call of ``principal`` acts on: the pinned one, or the one it names.

        Raises:
            PermissionDeniedError: another user than the pinned one; an app's owner for a
                non-admin principal.
            ValidationError: no user at all.
        """
        user = principal.acting_user(requested)
        _check_owner(principal, user)
        return user

    def open_call(self, principal: Principal) -> None:
        """Check that ``principal`` may hold a call session (its turns become memories), and
        so open, feed, end or look one up.

        Raises:
            PermissionDeniedError: the principal may only read.
        """
        require_write(principal, "a call session")

    # ---- memories by id -------------------------------------------------------------------
    def get(self, principal: Principal, memory_id: str) -> Memory:
        """One memory version of the principal's account.

        Raises:
            NotFoundError: no such memory in the account.
            PermissionDeniedError: an app memory for a non-admin principal.
        """
        memory = self.engine.get(memory_id, account_id=principal.account_id)
        _check_owner(principal, memory.user_id)
        return memory

    def current(self, principal: Principal, memory_id: str) -> Memory:
        """The current version of the memory ``memory_id`` names (the id of any of its
        versions): where the SDK's calls by id follow a memory across its updates.

        Raises:
            NotFoundError: no version of this id in the account.
            PermissionDeniedError: an app memory for a non-admin principal.
        """
        memory = self.engine.current(memory_id, account_id=principal.account_id)
        _check_owner(principal, memory.user_id)
        return memory

    def list_memories(
        self, principal: Principal, flt: MemoryFilter, *, limit: int, offset: int
    ) -> list[Memory]:
        """A user's memories (``flt`` names the user), newest first; an app's owner
        (``app:<app_id>``) lists that app's memories.

        Raises:
            PermissionDeniedError: an app's memories for a non-admin principal.
        """
        update: dict[str, Any] = {"account_id": principal.account_id}
        if flt.user_id is not None:
            _check_owner(principal, flt.user_id)
            if flt.app_id is None:
                # An app's owner holds only that app's scope, which a filter without an app
                # leaves out: listing the owner lists the app's memories.
                update["app_id"] = owner_app_id(flt.user_id)
        scoped = flt.model_copy(update=update)
        return self.engine.list_memories(scoped, limit=limit, offset=offset)

    def history(self, principal: Principal, memory_id: str) -> list[HistoryEvent]:
        """The audit events of every version of a memory, newest first (no values)."""
        self.get(principal, memory_id)
        return self.engine.history(memory_id, account_id=principal.account_id)

    def store(self, principal: Principal, fields: Mapping[str, Any], *, actor: str) -> Memory:
        """Store a memory in the principal's account exactly as given (no de-duplication).

        Raises:
            PermissionDeniedError: a ``read`` principal, or an app owner for a non-admin.
            ValidationError: invalid fields.
        """
        require_write(principal, "storing a memory")
        owner = fields.get("user_id")
        if isinstance(owner, str):
            _check_owner(principal, owner)
        key, value = fields.get("key"), fields.get("value")
        if key is None and isinstance(owner, str) and isinstance(value, str) and value.strip():
            kind = fields.get("type")
            key = next_note_key(
                self.engine,
                account_id=principal.account_id,
                user_id=owner,
                # An invalid type is the store's to refuse, with its own message.
                memory_type=MemoryType(kind) if kind in _TYPE_NAMES else MemoryType.FACT,
                value=value,
            )
        return self.engine.store(
            {**fields, "key": key, "account_id": principal.account_id, "source": Source.API},
            actor=actor,
        )

    def update(
        self,
        principal: Principal,
        memory_id: str,
        patch: Mapping[str, Any],
        *,
        actor: str,
        expected_row_version: int | None = None,
    ) -> Memory:
        """Write a new version of the memory with ``patch`` applied.

        Raises:
            PermissionDeniedError: a ``read`` principal; an app memory for a non-admin; a
                subject fact's visibility (its owner changes it through the fact operations).
            ConflictError: ``memory_id`` is a version a newer one superseded, or the memory
                is forgotten; :class:`PreconditionFailedError` when the expected row version
                is not the current one.
            NotFoundError: no such memory in the account.
        """
        require_write(principal, "updating a memory")
        memory = self.get(principal, memory_id)
        if "visibility" in patch and memory.category == FACT_MEMORY_CATEGORY:
            raise PermissionDeniedError(
                "only a subject fact's owner may share or unshare it (the facts API names them)"
            )
        if expected_row_version is None and memory.state == MemoryState.SUPERSEDED:
            raise ConflictError(f"memory {memory_id} was superseded; read it again and retry")
        try:
            # The version read above is the one compared, so a writer that supersedes it
            # meanwhile fails this update instead of being overwritten.
            return self.engine.update(
                memory_id,
                patch,
                account_id=principal.account_id,
                actor=actor,
                expected_row_version=(
                    memory.row_version if expected_row_version is None else expected_row_version
                ),
            )
        except PreconditionFailedError:
            if expected_row_version is not None:
                raise
            raise ConflictError(
                f"memory {memory_id} changed meanwhile; read it again and retry"
            ) from None

    def forget(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """Soft-delete a memory (restorable until purged)."""
        require_write(principal, "forgetting a memory")
        self.get(principal, memory_id)
        return self.engine.forget(memory_id, account_id=principal.account_id, actor=actor)

    def restore(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """Bring a forgotten memory back."""
        require_write(principal, "restoring a memory")
        self.get(principal, memory_id)
        return self.engine.restore(memory_id, account_id=principal.account_id, actor=actor)

    # ---- users ----------------------------------------------------------------------------
    def export_user(self, principal: Principal, user_id: str) -> dict[str, Any]:
        """Everything ``user_id`` owns in the principal's account, decrypted.

        Raises:
            PermissionDeniedError: an app owner for a non-admin principal.
        """
        _check_owner(principal, user_id)
        return self.engine.export_user(account_id=principal.account_id, user_id=user_id)

    def user_ids(self, principal: Principal) -> list[str]:
        """The ids of the principal's account's users that have memories, sorted.

        Internal owners are never listed, whatever the principal's scope: an app's memories
        are kept under the owner ``app:<app_id>`` (:data:`~confide.types.APP_OWNER_PREFIX`),
        which no user can be, so a user picker never offers it.
        """
        users = self.engine.storage.user_ids(principal.account_id)
        return [u for u in users if not u.startswith(APP_OWNER_PREFIX)]

    def erase_user(self, principal: Principal, user_id: str) -> ErasureReceipt:
        """Erase a user of the principal's account (crypto-shred): the operator's call.

        Raises:
            PermissionDeniedError: the principal is not an admin.
        """
        require_admin(principal, "erasing a user")
        return self.engine.erase_user(account_id=principal.account_id, user_id=user_id)

    def erasure(self, principal: Principal, erasure_id: str) -> ScrubReport:
        """Where an erasure of the principal's account stands: whether the scrub of the
        files is verified, done but unverifiable here, or still pending (and why).

        Raises:
            PermissionDeniedError: the principal is not an admin.
            NotFoundError: no erasure of this account has that id.
        """
        require_admin(principal, "reading an erasure")
        report = self.engine.scrub_report(erasure_id, account_id=principal.account_id)
        if report is None or report.kind != "erasure":
            raise NotFoundError("no such erasure")
        return report

    # ---- chat -----------------------------------------------------------------------------
    def add_message(self, principal: Principal, fields: Mapping[str, Any]) -> SavedMessage:
        """Save a chat message of the user ``fields`` names (sealed under their key).

        Raises:
            PermissionDeniedError: a ``read`` principal; another user than the pinned one.
            ValidationError: a bad field; NotFoundError: another user's conversation.
        """
        require_write(principal, "saving a message")
        user = self.user(principal, _text(fields.get("user_id")))
        return self.chat.add_message(
            {**fields, "account_id": principal.account_id, "user_id": user}
        )

    def list_messages(
        self,
        principal: Principal,
        *,
        user_id: str | None,
        conversation_id: str,
        cursor: int | None = None,
        limit: int = 50,
    ) -> MessagePage:
        """A page of the user's conversation, oldest first (404 for another user's)."""
        return self.chat.list_messages(
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            conversation_id=conversation_id,
            cursor=cursor,
            limit=limit,
        )

    def retrieve(
        self,
        principal: Principal,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str,
        channel: str | None = None,
        agent: str | None = None,
    ) -> ConversationHistory:
        """A conversation's recent messages with memory as context, of the categories that
        reach ``agent`` (:meth:`readable`)."""
        return self.chat.retrieve(
            text,
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            conversation_id=conversation_id,
            channel=channel,
            categories=self.readable(principal, agent),
        )

    def memory_context(
        self,
        principal: Principal,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str,
        channel: str | None = None,
        agent: str | None = None,
    ) -> MemoryContext:
        """:meth:`retrieve` in the older three-tier form, under the same rules."""
        return self.chat.memory_context(
            text,
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            conversation_id=conversation_id,
            channel=channel,
            categories=self.readable(principal, agent),
        )

    def deliver(
        self,
        principal: Principal,
        agent: str | None,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str | None = None,
        subject_id: str | None = None,
        channel: str | None = None,
    ) -> Delivery:
        """What to send ``agent``'s model (``None``: the principal's first agent) this turn,
        as its profile says, with the memories of the categories that reach it.

        Raises:
            PermissionDeniedError: an agent the principal is not bound to.
            ValidationError: an agent without a profile; a ``history`` delivery without a
                conversation.
        """
        agent = principal.agent_for(agent)
        categories = self.readable(principal, agent)
        return self.chat.deliver(
            self.categories.profile(agent),
            text,
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            conversation_id=conversation_id,
            subject_id=subject_id,
            channel=channel,
            categories=categories,
        )

    # ---- subject facts --------------------------------------------------------------------
    def subject_facts(
        self, principal: Principal, *, user_id: str | None, subject_id: str
    ) -> list[SubjectFact]:
        """The user's facts of the subject and those other users shared."""
        return self.chat.subject_facts(
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            subject_id=subject_id,
        )

    def set_fact_visibility(
        self, principal: Principal, *, user_id: str | None, fact_id: str, visibility: str
    ) -> SubjectFact:
        """Share or unshare a fact: its owner only (404 for anyone else).

        Raises:
            PermissionDeniedError: a ``read`` principal.
            NotFoundError: no such fact of this user.
        """
        require_write(principal, "sharing a fact")
        return self.chat.set_fact_visibility(
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            fact_id=fact_id,
            visibility=visibility,
        )

    def delete_fact(self, principal: Principal, *, user_id: str | None, fact_id: str) -> None:
        """Delete a fact: its owner only (404 for anyone else)."""
        require_write(principal, "deleting a fact")
        self.chat.delete_fact(
            account_id=principal.account_id,
            user_id=self.user(principal, user_id),
            fact_id=fact_id,
        )

    # ---- apps -----------------------------------------------------------------------------
    def app_context(self, principal: Principal, app_id: str) -> str:
        """The app's system message (what its agents read before a conversation)."""
        return self.apps.context(principal.account_id, app_id)

    def open_app_end(self, principal: Principal, user_id: str | None = None) -> str | None:
        """Check that ``principal`` may end an app conversation (it writes the app's memory);
        the user the conversation was with: the pinned one, or the one named (``None``:
        neither). The memory records that user, so that erasing them deletes it.

        Raises:
            PermissionDeniedError: the principal may only read; it names another user than
                the pinned one, or an app's owner without the admin scope.
        """
        require_write(principal, "ending an app conversation")
        if user_id is None and principal.user_id is None:
            return None
        return self.user(principal, user_id)

    def configure_app(
        self, principal: Principal, app_id: str, *, name: str | None, memory_cap: int | None
    ) -> AppSettings:
        """Set an app's display name and cap override (admin only)."""
        require_admin(principal, "configuring an app")
        return self.apps.configure(principal.account_id, app_id, name=name, memory_cap=memory_cap)

    def uninstall_app(
        self, principal: Principal, app_id: str, *, purge: bool = False
    ) -> ErasureReceipt | None:
        """Uninstall an app of the principal's account (admin only); with ``purge`` its
        memories are crypto-shredded and the erasure's receipt is the answer.

        Raises:
            PermissionDeniedError: the principal is not an admin.
            ValidationError: a bad app id.
        """
        require_admin(principal, "uninstalling an app")
        return self.apps.uninstall_with_receipt(principal.account_id, app_id, purge=purge)

    def app_memories(self, principal: Principal, app_id: str) -> list[Memory]:
        """Every memory of the app, newest first (admin only)."""
        require_admin(principal, "app memories")
        return self.apps.memories(principal.account_id, app_id)

    def delete_app_memories(self, principal: Principal, app_id: str) -> int:
        """Forget every memory of the app (admin only); how many."""
        require_admin(principal, "app memories")
        return self.apps.delete_all(principal.account_id, app_id)

    def delete_app_memory(self, principal: Principal, app_id: str, memory_id: str) -> None:
        """Forget one memory of the app (admin only; 404 when the app has none such)."""
        require_admin(principal, "app memories")
        self.apps.delete(principal.account_id, app_id, memory_id)

    # ---- consent queue --------------------------------------------------------------------
    def pending_proposals(self, principal: Principal, user_id: str | None) -> list[Proposal]:
        """The user's pending proposals, newest first."""
        return self.proposals.pending(
            account_id=principal.account_id, user_id=self.user(principal, user_id)
        )

    def confirm_proposal(self, principal: Principal, proposal_id: str) -> Memory:
        """Apply a pending proposal (the user's consent through a UI); the new version.

        Raises:
            PermissionDeniedError: a ``read`` principal; an app's proposal for a non-admin.
            NotFoundError: no pending proposal of that id in the account.
        """
        require_write(principal, "confirming a proposal")
        self._check_proposal(principal, proposal_id)
        return self.proposals.confirm(proposal_id, account_id=principal.account_id)

    def reject_proposal(self, principal: Principal, proposal_id: str) -> None:
        """Discard a pending proposal."""
        require_write(principal, "rejecting a proposal")
        self._check_proposal(principal, proposal_id)
        self.proposals.reject(proposal_id, account_id=principal.account_id)

    def _check_proposal(self, principal: Principal, proposal_id: str) -> None:
        owner = self.proposals.get(proposal_id, account_id=principal.account_id).user_id
        self.user(principal, owner)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
