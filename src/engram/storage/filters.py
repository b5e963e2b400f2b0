"""Compile a :class:`MemoryFilter` into a SQL ``WHERE`` clause shared by both backends."""

from __future__ import annotations

from typing import Any

from engram.types import MemoryFilter, Visibility


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
            clauses.append(f"({p}user_id = ? OR ({p}visibility = 'shared' AND {subject_clause}))")
            params.append(flt.user_id)
            if flt.subject_id is not None:
                params.append(flt.subject_id)
        else:
            clauses.append(f"{p}user_id = ?")
            params.append(flt.user_id)

    for column in ("agent_id", "run_id", "actor_id", "role", "subject_id"):
        value = getattr(flt, column)
        if value is not None:
            clauses.append(f"{p}{column} = ?")
            params.append(value)

    def any_of(column: str, values: tuple[str, ...]) -> None:
        if not values:
            clauses.append("1 = 0")
            return
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
        clauses.append(f"{p}visibility = ?")
        params.append(Visibility(flt.visibility).value)
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
