"""Confide's exception tree.

Every error Confide raises on purpose derives from :class:`ConfideError`; driver and vendor
errors are translated at the boundary where they occur. The HTTP service maps this tree
to status codes in one place (``confide.server.errors``)::

    ConfideError
    ├── ValidationError          400  bad input: a field out of range, a malformed id
    ├── NotFoundError            404  no such memory / session / key in the caller's scope
    ├── PermissionDeniedError    403  wrong account, category outside an agent's allowlist,
    │                                an agent the API key is not bound to
    ├── ConflictError            409  the operation does not fit the memory's state
    │   ├── PreconditionFailedError  412  the memory is no longer the version the caller read
    │   └── SessionHeldError     409  another service process holds the call's turns
    ├── ConfigurationError       ---  refused at start-up: malformed key, missing extra
    │   ├── MissingDependencyError    an optional extra is not installed
    │   ├── TokenizerMismatchError    the store's search terms come from another tokenizer
    │   └── IndexerMissingError  409  a write the store's vector index would miss
    ├── EmbedderMismatchError    409  the store was indexed with another embedder
    ├── IntegrityError           409  ciphertext, AAD or wrapped key failed authentication
    │   ├── TamperedRowError     409  a stored memory row was changed outside Confide
    │   ├── KeyMismatchError     503  a stored key does not open under this process's KEK
    │   └── KeyUnavailableError  503  a key-encryption key this process does not hold
    ├── StorageError             503  the database failed (never carries memory text)
    └── ProviderError            502  an LLM or embedding endpoint failed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class ConfideError(Exception):
    """Base class of every error Confide raises on purpose."""


class ValidationError(ConfideError, ValueError):
    """Input failed validation; the message says which field and why.

    ``fields`` names the fields at fault (as the caller spelled them) and ``allowed`` gives
    the values a field with a fixed set of values takes: every door reports them alike.
    """

    def __init__(
        self,
        message: str,
        *,
        fields: Sequence[str] = (),
        allowed: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.fields = tuple(fields)
        self.allowed = {name: tuple(values) for name, values in (allowed or {}).items()}


class NotFoundError(ConfideError, LookupError):
    """The requested object does not exist in the caller's scope."""


class PermissionDeniedError(ConfideError):
    """The caller may not read or change the requested object."""


class ConflictError(ConfideError):
    """The operation does not fit the current state (e.g. restoring an active memory)."""


class StaleKeyError(ConflictError):
    """The user's key was destroyed (the user erased) since this process read it; a write
    sealed under it is refused, so it can be sealed again under the user's new key."""


class PreconditionFailedError(ConflictError):
    """The caller named the state it read (an expected row version), and it has changed."""


class SessionHeldError(ConflictError):
    """Another service process holds the call session's turns in its memory.

    ``worker`` names that process (``id``, and ``host`` and ``pid`` for people); requests
    carrying the call's ``callSessionId`` belong there.
    """

    def __init__(self, worker: dict[str, object]) -> None:
        super().__init__("Call session is held by another worker")
        self.worker = worker


class ConfigurationError(ConfideError):
    """Confide cannot start with the given configuration."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional extra is required for the requested feature."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'confide[{extra}]'"
        )
        self.package = package
        self.extra = extra


class TokenizerMismatchError(ConfigurationError):
    """The store's search terms were made by another version of the tokenizer.

    Refused when the engine opens the store: its lexical search would silently miss. ``confide
    reindex`` re-writes every memory's terms and records the current version.
    """


class IndexerMissingError(ConfigurationError):
    """A write to a store with a bound embedder from an engine that makes no vectors.

    The new memory would be missing from similarity search and the relation graph. Reads are
    unaffected; open the store with its embedder (``Confide.open``) to write.
    """


class EmbedderMismatchError(ConfideError):
    """The store's vectors were made by a different embedder than the configured one."""


class IntegrityError(ConfideError):
    """Encrypted data failed authentication: tampered ciphertext, AAD or wrapped key."""


class KeyUnavailableError(IntegrityError):
    """A key needed to open or wrap data is not available to this process.

    Raised when a key-encryption key named by a stored key is in no key file or setting this
    process can read (for example after a rotation to a key only other processes were given).
    """


class KeyMismatchError(IntegrityError):
    """A stored user or index key does not open under the key-encryption key it names.

    The process was given a wrong key under the right name, or the wrapped key was changed
    in the key store. Nothing of the owner's data is returned; the stored rows are not at
    fault and are not counted as tampered.
    """


class TamperedRowError(IntegrityError):
    """A stored memory row fails authentication: its ciphertext, or a column bound to it
    (owner, id, blinded key, visibility, type, category, subject), was changed outside Confide.

    Listings and searches skip such a row (and count it); reading it by id raises this.
    """


class StorageError(ConfideError):
    """The storage backend failed; the message never contains memory text."""


class ProviderError(ConfideError):
    """An LLM or embedding provider failed (timeout, HTTP error, malformed answer)."""


HTTP_STATUS: tuple[tuple[type[ConfideError], int], ...] = (
    (ValidationError, 400),
    (NotFoundError, 404),
    (PermissionDeniedError, 403),
    (PreconditionFailedError, 412),  # before its base class: the first match wins
    (ConflictError, 409),
    (EmbedderMismatchError, 409),
    (IndexerMissingError, 409),  # before ConfigurationError: the message says what to do
    (KeyUnavailableError, 503),
    # A key that does not open is the deployment's problem, not the caller's; a row that
    # fails authentication is left out of listings, and read by id it is a conflict with
    # the stored state (never data, never a 500).
    (KeyMismatchError, 503),
    (IntegrityError, 409),
    (StorageError, 503),
    (ProviderError, 502),
    (ConfigurationError, 500),
)
"""The tree's HTTP status codes (the service answers with them, the remote SDK reads them)."""


def http_status(exc: ConfideError) -> int:
    """The HTTP status of a Confide error (500 for one the table does not name)."""
    return http_status_of(type(exc))


def http_status_of(kind: type[ConfideError]) -> int:
    """The HTTP status of a class of the tree (500 for one the table does not name)."""
    return next((status for base, status in HTTP_STATUS if issubclass(kind, base)), 500)


# Statuses read back to classes: the first class the table maps to each (the most specific,
# as it lists them); a 5xx answer never says why, so it stands for the plain class of its kind.
_CLASS_BY_STATUS: dict[int, type[ConfideError]] = {}
for _kind, _status in HTTP_STATUS:
    _CLASS_BY_STATUS.setdefault(_status, _kind)
_CLASS_BY_STATUS.update(
    {
        401: PermissionDeniedError,
        413: ValidationError,
        422: ValidationError,
        500: ConfideError,
        503: StorageError,
    }
)


def error_for_http_status(status: int) -> type[ConfideError]:
    """The class of the tree an HTTP error status stands for (:class:`ConfideError` for a
    status the tree has no class for)."""
    return _CLASS_BY_STATUS.get(status, ConfideError)


def error_answer(exc: ConfideError) -> dict[str, object]:
    """A failed call's answer, alike on every door that answers in JSON (the HTTP tool
    routes, the Realtime ``function_call_output``): ``success`` false, the message as
    ``error``, the class as ``type`` and, for a :class:`ValidationError`, the ``fields`` at
    fault and the values a field with a fixed set is ``allowed`` (each only when given)."""
    answer: dict[str, object] = {"success": False, "error": str(exc), "type": type(exc).__name__}
    if isinstance(exc, ValidationError):
        if exc.fields:
            answer["fields"] = list(exc.fields)
        if exc.allowed:
            answer["allowed"] = {name: list(values) for name, values in exc.allowed.items()}
    return answer


def error_text(exc: ConfideError) -> str:
    """A failed call as one line, ``<ErrorClass>: <message>`` (MCP's tool errors)."""
    return f"{type(exc).__name__}: {exc}"


def error_named(name: str) -> type[ConfideError] | None:
    """The class of the tree called ``name`` (as an error answer's ``type`` names it)."""
    found: list[type[ConfideError]] = [ConfideError]
    while found:
        kind = found.pop()
        if kind.__name__ == name:
            return kind
        found.extend(kind.__subclasses__())
    return None
