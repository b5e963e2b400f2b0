"""Bearer API keys: random tokens stored as SHA-256 hashes, each bound to one account.

A token reads ``egk_<id>_<secret>``: the id finds the row, the hash of the whole token is
compared in constant time. The token itself is shown once, when created.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from engram.storage.base import Storage
from engram.storage.sessions import ApiKeyRow, ServiceTables

__all__ = ["ApiKeys", "hash_token"]

PREFIX = "egk"
ADMIN_SCOPE = "admin"


def hash_token(token: str) -> str:
    """The SHA-256 hex digest of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


class ApiKeys:
    """Creates and verifies API keys stored in the service tables."""

    def __init__(self, tables: ServiceTables) -> None:
        self._tables = tables

    @classmethod
    def over(cls, storage: Storage) -> ApiKeys:
        """API keys kept in ``storage``."""
        return cls(ServiceTables(storage))

    def create(self, account_id: str, *, admin: bool = False) -> str:
        """Make a key for ``account_id`` and return the token (it is not stored).

        An ``admin`` key may also call operator routes (``DELETE /v1/users/{id}``).
        """
        if not account_id.strip():
            raise ValueError("account id must not be empty")
        key_id = secrets.token_hex(8)
        token = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        self._tables.insert_api_key(
            ApiKeyRow(
                id=key_id,
                account_id=account_id,
                token_hash=hash_token(token),
                created_at=time.time(),
                revoked_at=None,
                scopes=ADMIN_SCOPE if admin else "",
            )
        )
        return token

    def account_of(self, token: str) -> str | None:
        """The account a valid token belongs to, or ``None``."""
        row = self._verified(token)
        return None if row is None else row.account_id

    def admin_account_of(self, token: str) -> tuple[str, bool] | None:
        """The account of a valid token and whether it has the admin scope, or ``None``."""
        row = self._verified(token)
        if row is None:
            return None
        return row.account_id, ADMIN_SCOPE in row.scopes.split(",")

    def _verified(self, token: str) -> ApiKeyRow | None:
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX:
            return None
        row = self._tables.get_api_key(parts[1])
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(row.token_hash, hash_token(token)):
            return None
        return row
