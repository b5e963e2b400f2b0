"""Compile a :class:`MemoryFilter` into a SQL ``WHERE`` clause shared by both backends."""

from __future__ import annotations

from typing import Any

from confide.types import MemoryFilter, Visibility


def _ts(value: Any) -> float:
    return float(value.timestamp())


def compile_filter(flt: MemoryFilter, alias: str = "m") -> tuple[str, list[Any]]:
    """Return ``(sql, params)`` with ``?`` placeholders for every filter in ``flt``.

    Ownership: the user's own memories; with ``include_shared``, also other users' shared
    memories about the same subject (the filter's ``subject_id``, or no subject).
    """
    p = f"{alias}." if alias else ""
    clauses: list[str] = [f"{p}account_id = ?"]
    params: list[Any] = [flt.account_id]

    if flt.user_id is not None:
        if flt.include_shared:
            subject_clause = (
                f"{p}subject_id = ?" if flt.subject_id is not None else f"{p}subject_id IS NULL"
            )
            # The account is repeated inside each branch so that each can use its own index
            # (the owner index, the partial index of shared memories).
            clauses.append(
                f"(({p}account_id = ? AND {p}user_id = ?) OR ({p}account_id = ? AND "
                f"{p}visibility = 'shared' AND {subject_clause}))"
            )
            params.extend([flt.account_id, flt.user_id, flt.account_id])
            if flt.subject_id is not None:
                params.append(flt.subject_id)
        else:
            clauses.append(f"{p}user_id = ?")
            params.append(flt.user_id)

    # An app's scope is a filter of its own; without one, only memories outside every app.
    if flt.app_id is not None:
        clauses.append(f"{p}app_id = ?")
        params.append(flt.app_id)
    else:
        clauses.append(f"{p}app_id IS NULL")

    for column in ("agent_id", "run_id", "actor_id", "role", "subject_id"):
        value = getattr(flt, column)
        if value is not None:
            clauses.append(f"{p}{column} = ?")
            params.append(value)

    def any_of(column: str, values: tuple[str, ...]) -> None:
        if not values:
            clauses.append("1 = 0")
            return
        # One value as an equality: SQLite's planner, reading its value statistics, can take
        # ``x IN (?)`` for a range and scan the table where ``x = ?`` reads one index range.
        if len(values) == 1:
            clauses.append(f"{p}{column} = ?")
        else:
            clauses.append(f"{p}{column} IN ({', '.join('?' for _ in values)})")
        params.extend(values)

    any_of("state", tuple(s.value for s in flt.states))
    if flt.types is not None:
        any_of("type", tuple(t.value for t in flt.types))
    if flt.categories is not None:
        any_of("category", flt.categories)
    if flt.keys is not None:
        any_of("key_lc", tuple(k.lower() for k in flt.keys))
    if flt.visibility is not None:
        # A literal (from the enum, never user text) lets the planner use partial indexes.
        clauses.append(f"{p}visibility = '{Visibility(flt.visibility).value}'")
    if flt.pinned is not None:
        clauses.append(f"{p}pinned = ?")
        params.append(flt.pinned)
    if flt.source is not None:
        clauses.append(f"{p}source = ?")
        params.append(flt.source.value)
    for column, op, value in (
        ("importance", ">=", flt.importance_min),
        ("importance", "<=", flt.importance_max),
        ("confidence", ">=", flt.confidence_min),
    ):
        if value is not None:
            clauses.append(f"{p}{column} {op} ?")
            params.append(value)
    for column, op, when in (
        ("created_at", ">=", flt.created_after),
        ("created_at", "<", flt.created_before),
        ("updated_at", ">=", flt.updated_after),
        ("updated_at", "<", flt.updated_before),
    ):
        if when is not None:
            clauses.append(f"{p}{column} {op} ?")
            params.append(_ts(when))
    return " AND ".join(clauses), params


def compile_others_shared(flt: MemoryFilter, alias: str = "m") -> tuple[str, list[Any]]:
    """The part of an ``include_shared`` filter that reaches *other* users' memories.

    Queries split ``include_shared`` into the user's own memories and this, so each half is
    answered by its own index instead of one disjunction that walks the whole account.
    """
    p = f"{alias}." if alias else ""
    others = flt.model_copy(
        update={"user_id": None, "include_shared": False, "visibility": Visibility.SHARED}
    )
    where, params = compile_filter(others, alias)
    where += f" AND {p}user_id <> ?"
    params.append(flt.user_id)
    if flt.subject_id is None:
        where += f" AND {p}subject_id IS NULL"
    return where, params
