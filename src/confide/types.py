"""The memory data model: enums, memories, filters and the records Confide returns.

Everything here is validated at construction, so a value that reaches the engine is in range.
Models are frozen; build a changed copy with ``model_copy(update=...)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from confide.errors import ValidationError

__all__ = [
    "LISTING_FILTERS",
    "UPDATE_FIELDS",
    "AddResult",
    "ChangeEvent",
    "ErasureReceipt",
    "HistoryEvent",
    "HistoryEventType",
    "ImportReport",
    "Memory",
    "MemoryFilter",
    "MemoryPatch",
    "MemoryState",
    "MemoryType",
    "NewMemory",
    "OpEvent",
    "Progress",
    "PurgeReport",
    "ResidueFinding",
    "ResidueMarkers",
    "ResidueScan",
    "ScrubReport",
    "ScrubStatus",
    "Source",
    "Visibility",
    "category_filter",
    "invalid",
    "listing_filter",
    "update_patch",
    "utcnow",
    "validated",
]

KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
MAX_VALUE_CHARS = 16_000


ModelT = TypeVar("ModelT", bound=BaseModel)


def validated(model: type[ModelT], data: ModelT | Mapping[str, Any]) -> ModelT:
    """Build ``model`` from ``data``, turning pydantic's error into Confide's ValidationError.

    The message names each offending field and why, without echoing the submitted values;
    the error's ``fields`` and ``allowed`` say the same for programs (:func:`invalid`).
    Anything but a ``model`` or a mapping (a string, a list) is a :class:`TypeError`.
    """
    if isinstance(data, model):
        return data
    if not isinstance(data, Mapping):
        raise TypeError(
            f"expected a {model.__name__} or a mapping of its fields, not {type(data).__name__}"
        )
    try:
        return model.model_validate(dict(data))
    except PydanticValidationError as exc:
        # "invalid new memory": the model's name in words, not a class name to the caller.
        label = _CAPITALS.sub(r" \1", model.__name__).strip().lower()
        raise invalid(exc, what=f"invalid {label}") from None


_CAPITALS = re.compile(r"([A-Z])")
_QUOTED = re.compile(r"'([^']*)'")
_CHOICE_ERRORS = frozenset({"enum", "literal_error"})


def invalid(
    exc: PydanticValidationError, *, what: str, spell: Callable[[str], str] = str
) -> ValidationError:
    """Confide's :class:`ValidationError` for pydantic's, the one form every door reports.

    The message is ``what`` followed by each field at fault and why (an error of the whole
    input by its reason alone); ``fields`` names the fields as ``spell`` writes them (the
    caller's own spelling), and ``allowed`` the values of a field that takes a fixed set.
    A validator that raises Confide's own :class:`ValidationError` (a rule over several
    fields) adds the fields and values that error names. Submitted values are never echoed.
    """
    problems: list[str] = []
    fields: list[str] = []
    allowed: dict[str, list[str]] = {}
    for err in exc.errors(include_input=False, include_url=False):
        loc = ".".join(spell(str(p)) for p in err["loc"])
        reason = str(err["msg"]).removeprefix("Value error, ")
        problems.append(f"{loc}: {reason}" if loc else reason)
        if loc and loc not in fields:
            fields.append(loc)
        ctx = err.get("ctx") or {}
        expected = ctx.get("expected")
        if loc and err["type"] in _CHOICE_ERRORS and isinstance(expected, str):
            allowed[loc] = _QUOTED.findall(expected)
        cause = ctx.get("error")
        if isinstance(cause, ValidationError):
            fields.extend(f for f in cause.fields if f not in fields)
            allowed.update({name: list(values) for name, values in cause.allowed.items()})
    return ValidationError(f"{what}: {'; '.join(problems)}", fields=fields, allowed=allowed)


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class MemoryType(StrEnum):
    """What kind of thing a memory records."""

    FACT = "fact"
    PREFERENCE = "preference"
    FOLLOW_UP = "follow_up"
    CONTEXT = "context"
    HISTORY = "history"
    WELLBEING = "wellbeing"
    INSIGHT = "insight"
    PROCEDURAL = "procedural"
    EPISODIC = "episodic"


class Source(StrEnum):
    """Where a memory came from."""

    CONVERSATION = "conversation"
    EXTRACTION = "extraction"
    TOOL = "tool"
    API = "api"
    CONSOLIDATION = "consolidation"
    INSIGHT = "insight"
    IMPORT = "import"


class Visibility(StrEnum):
    """Who may read a memory: its owner only, or everyone sharing its subject."""

    PRIVATE = "private"
    SHARED = "shared"

    @classmethod
    def _missing_(cls, value: object) -> Visibility | None:
        # The voice product calls a memory that stays with one phone line "line_only".
        if isinstance(value, str) and value.lower() == "line_only":
            return cls.PRIVATE
        return None


class MemoryState(StrEnum):
    """Lifecycle of one stored version.

    ``superseded`` marks a version replaced by an update; only the newest version of a
    memory is ``active`` (or ``soft_deleted`` when forgotten).
    """

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    SOFT_DELETED = "soft_deleted"
    PURGED = "purged"


class HistoryEventType(StrEnum):
    """Events recorded in the audit history."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE = "MERGE"
    LINK = "LINK"
    TTL = "TTL"
    RESTORE = "RESTORE"
    PURGE = "PURGE"
    PRIVACY = "PRIVACY"
    PROPOSAL = "PROPOSAL"
    """A change held for confirmation, and the decision on it (meta ``decision``)."""


Identifier = Annotated[str, Field(min_length=1, max_length=256)]

Progress = Callable[[int, int | None], None]
"""Told how far a long job has got: ``progress(done, total)``, the items done so far and how
many there are (``None`` when not known), first with ``done`` 0, then after each step. The
command line draws it as a progress bar; the engine knows nothing of terminals."""

DEFAULT_ACCOUNT = "default"
"""The account the SDK (``confide.client.Confide``) and the command line act in unless told
otherwise."""

APP_OWNER_PREFIX = "app:"
"""User ids with this prefix are reserved: an app's memories are kept (and encrypted) under
the owner ``app:<app_id>``, so no user's data may be sealed under that owner's keys."""


def check_user_id(user_id: str) -> str:
    """``user_id`` unless it is reserved for an app scope (:data:`APP_OWNER_PREFIX`)."""
    if user_id.startswith(APP_OWNER_PREFIX):
        raise ValueError(f"user ids starting with {APP_OWNER_PREFIX!r} are reserved for app scopes")
    return user_id


def owner_app_id(user_id: str | None) -> str | None:
    """The app whose scope the owner ``user_id`` holds (``app:<app_id>``); ``None`` for a user.

    A filter that names an app's owner must name that app too: without an ``app_id`` a filter
    matches only memories outside every app scope (:class:`MemoryFilter`).
    """
    if user_id is None or not user_id.startswith(APP_OWNER_PREFIX):
        return None
    return user_id.removeprefix(APP_OWNER_PREFIX)


Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Importance = Annotated[int, Field(ge=1, le=5)]

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


def _check_key(key: str) -> str:
    if not KEY_PATTERN.fullmatch(key):
        raise ValueError(
            "key must be 1-128 characters of letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (snake_case recommended)"
        )
    return key


def _check_value(value: str) -> str:
    if not value.strip():
        raise ValueError("value must not be empty")
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"value must be at most {MAX_VALUE_CHARS} characters")
    return value


def _check_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    if len(tags) > 32 or any(not t or len(t) > 64 for t in tags):
        raise ValueError("tags: at most 32 tags of 1-64 characters each")
    return tags


class NewMemory(BaseModel):
    """What a caller supplies to store a memory; the engine fills in the rest."""

    model_config = _FROZEN

    account_id: Identifier
    user_id: Identifier
    key: str
    value: str
    type: MemoryType = MemoryType.FACT
    category: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    agent_id: Identifier | None = None
    run_id: Identifier | None = None
    actor_id: Identifier | None = None
    role: Annotated[str, Field(min_length=1, max_length=32)] | None = None
    subject_id: Identifier | None = None
    app_id: Identifier | None = None
    """The app whose curated scope holds this memory (see :mod:`confide.apps`); ``None``
    for a user's own memory."""
    confidence: Confidence = 1.0
    importance: Importance = 2
    source: Source = Source.API
    visibility: Visibility = Visibility.PRIVATE
    pinned: bool = False
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    expires_at: datetime | None = None

    @field_validator("key")
    @classmethod
    def _key_ok(cls, v: str) -> str:
        return _check_key(v)

    @field_validator("value")
    @classmethod
    def _value_ok(cls, v: str) -> str:
        return _check_value(v)

    @field_validator("tags")
    @classmethod
    def _tags_ok(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _check_tags(v)

    @model_validator(mode="after")
    def _owner_ok(self) -> NewMemory:
        # An app scope's memories belong to its reserved owner, and only they may.
        if self.app_id is None:
            check_user_id(self.user_id)
        elif self.user_id != APP_OWNER_PREFIX + self.app_id:
            raise ValueError(f"an app memory belongs to the user {APP_OWNER_PREFIX}<app_id>")
        return self


class MemoryPatch(BaseModel):
    """Fields an update may change; ``None`` keeps the current value."""

    model_config = _FROZEN

    value: str | None = None
    type: MemoryType | None = None
    category: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    confidence: Confidence | None = None
    importance: Importance | None = None
    visibility: Visibility | None = None
    pinned: bool | None = None
    tags: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    source: Source | None = None
    expires_at: datetime | None = None

    @field_validator("value")
    @classmethod
    def _value_ok(cls, v: str | None) -> str | None:
        return None if v is None else _check_value(v)

    @field_validator("tags")
    @classmethod
    def _tags_ok(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if v is None else _check_tags(v)


class Memory(BaseModel):
    """One stored version of a memory, decrypted.

    ``version`` counts the memory's versions; ``row_version`` counts in-place changes of this
    one (forget, restore, visibility, being superseded). Together with ``id`` it names the
    state a caller read, for :meth:`MemoryEngine.update`'s ``expected_row_version`` and the
    service's ``ETag``.
    """

    model_config = _FROZEN

    id: str
    account_id: str
    user_id: str
    agent_id: str | None = None
    run_id: str | None = None
    actor_id: str | None = None
    role: str | None = None
    subject_id: str | None = None
    app_id: str | None = None
    type: MemoryType
    category: str | None = None
    key: str
    value: str
    confidence: float
    importance: int
    source: Source
    visibility: Visibility
    pinned: bool
    state: MemoryState
    version: int
    row_version: int = 1
    supersedes_id: str | None = None
    lineage_id: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None = None
    purge_at: datetime | None = None
    expires_at: datetime | None = None


def category_filter(categories: Iterable[str] | None) -> tuple[str, ...] | None:
    """``categories`` as :attr:`MemoryFilter.categories` takes them (``None``: every category)."""
    return None if categories is None else tuple(categories)


class AddResult(Memory):
    """One memory an ``add`` of the SDK answers with: a :class:`Memory` (read it as one) that
    also says what ``add`` did with it.

    ``status`` is ``"created"`` (stored now) or ``"duplicate"`` (the text nearly repeats
    this active memory, which ``add`` returns instead of storing it again; ``similarity`` is
    the score that decided it, see :class:`~confide.conversation.dedup.DedupPolicy`).
    """

    status: Literal["created", "duplicate"] = "created"
    similarity: float | None = None

    @property
    def memory(self) -> Memory:
        """The memory itself, as a plain :class:`Memory`."""
        return Memory.model_validate(self.model_dump(exclude={"status", "similarity"}))

    @classmethod
    def of(
        cls,
        memory: Memory,
        status: Literal["created", "duplicate"] = "created",
        similarity: float | None = None,
    ) -> AddResult:
        """``memory`` with what ``add`` did with it."""
        return cls.model_validate(
            {**memory.model_dump(), "status": status, "similarity": similarity}
        )


class MemoryFilter(BaseModel):
    """Filters for listing and retrieval; every one is applied inside the database query.

    ``states`` defaults to active memories only. ``include_shared`` widens a user's view to
    memories other users of the same account shared about the same ``subject_id``.
    ``app_id`` names one app's scope; without it only memories outside every app scope
    match (users' memories never mix with apps').
    """

    model_config = _FROZEN

    account_id: Identifier
    user_id: Identifier | None = None
    agent_id: Identifier | None = None
    run_id: Identifier | None = None
    actor_id: Identifier | None = None
    role: str | None = None
    subject_id: Identifier | None = None
    app_id: Identifier | None = None
    types: tuple[MemoryType, ...] | None = None
    categories: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    visibility: Visibility | None = None
    pinned: bool | None = None
    source: Source | None = None
    states: tuple[MemoryState, ...] = (MemoryState.ACTIVE,)
    importance_min: Importance | None = None
    importance_max: Importance | None = None
    confidence_min: Confidence | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    include_shared: bool = False


LISTING_FILTERS = ("type", "category", "agent_id", "run_id")
"""The filters the SDK's ``get_all`` takes (embedded and remote alike)."""


def listing_filter(
    *,
    account_id: str,
    user_id: str,
    filters: Mapping[str, Any] | None = None,
    include_forgotten: bool = False,
) -> MemoryFilter:
    """The :class:`MemoryFilter` of an SDK listing: one user's memories, active (and
    forgotten, still restorable, with ``include_forgotten``), narrowed by ``filters``:
    ``type`` and ``category`` (one name or a list of them), ``agent_id``, ``run_id``.

    Raises:
        ValidationError: a filter not among :data:`LISTING_FILTERS`, or an invalid value.
    """
    given = dict(filters or {})
    unknown = sorted(set(given) - set(LISTING_FILTERS))
    if unknown:
        raise ValidationError(
            f"unknown filter {', '.join(unknown)}; get_all filters by {', '.join(LISTING_FILTERS)}",
            fields=unknown,
            allowed={"filters": list(LISTING_FILTERS)},
        )

    def names(value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        return (value,) if isinstance(value, str) else tuple(value)

    fields: dict[str, Any] = {
        "account_id": account_id,
        "user_id": user_id,
        "types": names(given.get("type")),
        "categories": names(given.get("category")),
        "agent_id": given.get("agent_id"),
        "run_id": given.get("run_id"),
    }
    if include_forgotten:
        fields["states"] = (MemoryState.ACTIVE, MemoryState.SOFT_DELETED)
    return validated(MemoryFilter, fields)


UPDATE_FIELDS = ("value", "type", "confidence", "importance", "visibility", "tags")
"""The fields the SDK's ``update`` changes (embedded and remote alike)."""


def update_patch(data: str | MemoryPatch | Mapping[str, Any]) -> dict[str, Any]:
    """The fields an SDK ``update`` changes, validated: a text is the new ``value``; a
    :class:`MemoryPatch` or a mapping names fields among :data:`UPDATE_FIELDS`.

    Raises:
        TypeError: ``data`` is neither a text, a patch nor a mapping.
        ValidationError: an empty text, another field, or an invalid value.
    """
    if isinstance(data, str):
        data = {"value": data.strip()}
    if isinstance(data, MemoryPatch):
        data = data.model_dump(exclude_none=True)
    if not isinstance(data, Mapping):
        raise TypeError(
            f"update() takes the new text or a dict of fields to change, not {type(data).__name__}"
        )
    other = sorted(set(data) - set(UPDATE_FIELDS))
    if other:
        raise ValidationError(
            f"update() cannot change {', '.join(other)}; it changes {', '.join(UPDATE_FIELDS)}",
            fields=other,
        )
    if not data:
        raise ValidationError("update() needs a field to change", fields=["value"])
    patch = validated(MemoryPatch, data)
    return patch.model_dump(exclude_none=True, include=set(UPDATE_FIELDS))


class HistoryEvent(BaseModel):
    """One audit-history entry; it refers to versions by id and never carries memory text."""

    model_config = _FROZEN

    id: int
    memory_id: str
    lineage_id: str
    event: HistoryEventType
    old_ref: str | None
    new_ref: str | None
    actor: str | None
    meta: dict[str, Any]
    ts: datetime


class ChangeEvent(BaseModel):
    """One change-log entry of a thread, numbered by the thread's revision counter."""

    model_config = _FROZEN

    thread_id: str
    rev: int
    memory_id: str
    event: HistoryEventType
    meta: dict[str, Any]
    ts: datetime


class OpEvent(BaseModel):
    """An operational event (what a node of the system did), for counts over time."""

    model_config = _FROZEN

    user_id: str | None = None
    thread_id: str | None = None
    node: str
    op: str
    status: str = "ok"
    memory_id: str | None = None
    category: str | None = None
    sim: float | None = None
    ts: datetime | None = None


class PurgeReport(BaseModel):
    """How many memory versions a purge removed."""

    model_config = _FROZEN

    purged: int
    scrubbed: str | None = None
    """How the database's files were cleared of the purged rows (None: nothing purged)."""


class ResidueMarkers(BaseModel):
    """What an erasure's scan looks for in the files: the ids of the destroyed keys, and
    16-byte fragments (hex) of the wrapped keys and the ciphertexts it deleted."""

    model_config = _FROZEN

    key_ids: list[str] = []
    fragments: list[str] = []


class ResidueFinding(BaseModel):
    """One marker found in a file, at a byte offset."""

    model_config = _FROZEN

    marker: str
    file: str
    offset: int


class ResidueScan(BaseModel):
    """What a scan of the store's files found (``verify-erasure``).

    ``occurrences`` counts every place a marker was found (``found`` lists the first
    ones); ``unreadable`` names the files that exist but could not be read from here.
    """

    model_config = _FROZEN

    files_read: int
    unreadable: list[str] = []
    occurrences: int = 0
    found: list[ResidueFinding] = []

    @property
    def clean(self) -> bool:
        """Nothing found, and every file read."""
        return self.occurrences == 0 and not self.unreadable


ScrubStatus = Literal["verified", "scrubbed", "pending"]
"""``verified``: scrubbed, and a scan of the files found no marker; ``scrubbed``: every scrub
step ran but the files are not readable here to verify it; ``pending``: a step was refused
or the scan found residue, and the worker retries until it is done."""


class ErasureReceipt(BaseModel):
    """Proof of a crypto-shred: what was destroyed, where, and how.

    ``key_ids_destroyed`` are the user's keys deleted from the key store (``key_store`` says
    where it lives: apart from the data, so copies of the data hold no key); ``deleted``
    counts the rows deleted per table; ``scrubbed`` says how the data files and the key
    store's files were cleared of them. ``status`` says whether that is finished and
    verified (see :data:`ScrubStatus`), ``blocked_by`` what holds it up while pending;
    ``markers`` are what ``confide verify-erasure`` looks for, and ``scan`` what the erasure's
    own scan of the files found. ``id`` names the erasure (``GET /v1/erasures/{id}``).
    """

    model_config = _FROZEN

    id: str = ""
    account_id: str
    user_id: str
    key_id_destroyed: str | None
    key_ids_destroyed: list[str] = []
    key_store: str = ""
    deleted: dict[str, int]
    scrubbed: dict[str, str] = {}
    status: ScrubStatus = "verified"
    blocked_by: str | None = None
    markers: ResidueMarkers = ResidueMarkers()
    scan: ResidueScan | None = None
    erased_at: datetime


class ScrubReport(BaseModel):
    """Where an owed scrub (an erasure's, a purge's or a key rotation's) stands."""

    model_config = _FROZEN

    id: str
    kind: str
    status: ScrubStatus
    detail: str
    attempts: int
    scan: ResidueScan | None = None


class ImportReport(BaseModel):
    """Outcome of importing an export document."""

    model_config = _FROZEN

    imported: int
    skipped: int
