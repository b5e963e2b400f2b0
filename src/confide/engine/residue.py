"""Residue: the byte strings an erasure must leave nowhere, and the scan that looks for them.

Before an erasure deletes a user's rows it takes **markers** from them: the ids of the keys
it destroys, the authentication tag of each wrapped user key (its last 16 bytes: enough to
recognise it, and no part of the key even with the KEK), and 16-byte fragments of the head
and tail of each ciphertext and wrapped data key (sealed under the destroyed key, so they
reveal nothing). The scan reads files as raw bytes, the way a forensic carver would, and
reports every place a marker occurs: free pages, WAL frames and dead tuples included.

Why not a library: carving tools (bulk_extractor, scalpel) look for file signatures, not a
set of known byte strings, and none runs in process. The search is numpy's: for each of the
eight byte alignments, every 8-byte word of the file is tested against the fragments'
first words at once, and only the rare hits are compared whole.

Stored markers (an owed scrub's row, retried later) are written in hex, so the row that
describes them never matches them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from confide.storage.keystore import KeyStore
from confide.types import ResidueFinding, ResidueMarkers, ResidueScan

__all__ = [
    "FRAGMENT_BYTES",
    "MARKER_ROWS",
    "decode_markers",
    "encode_markers",
    "files_under",
    "key_markers",
    "markers_of",
    "scan_files",
]

FRAGMENT_BYTES = 16
"""The length of a ciphertext or wrapped-key fragment."""

MARKER_ROWS = 2_000
"""At most this many sealed values give fragments (a receipt stays small for big users)."""

_CHUNK = 64 * 1024 * 1024
_FINDINGS_MAX = 200


def markers_of(key_rows: Iterable[tuple[str, bytes]], sealed: Iterable[bytes]) -> ResidueMarkers:
    """Markers for keys ``(key_id, wrapped)`` and sealed values (ciphertexts, wrapped data
    keys) of one owner, taken before they are deleted."""
    key_ids: list[str] = []
    fragments: list[str] = []
    for key_id, wrapped in key_rows:
        key_ids.append(key_id)
        if len(wrapped) >= FRAGMENT_BYTES:
            fragments.append(wrapped[-FRAGMENT_BYTES:].hex())
    for blob in sealed:
        if len(blob) >= FRAGMENT_BYTES:
            fragments.append(blob[:FRAGMENT_BYTES].hex())
        if len(blob) >= 2 * FRAGMENT_BYTES:
            fragments.append(blob[-FRAGMENT_BYTES:].hex())
    return ResidueMarkers(key_ids=key_ids, fragments=list(dict.fromkeys(fragments)))


def encode_markers(markers: ResidueMarkers) -> str:
    """The markers as stored in an owed scrub's row: every string in hex."""
    return json.dumps(
        {"k": [k.encode().hex() for k in markers.key_ids], "f": markers.fragments},
        separators=(",", ":"),
    )


def decode_markers(text: str) -> ResidueMarkers:
    """The markers :func:`encode_markers` stored."""
    if not text:
        return ResidueMarkers()
    data = json.loads(text)
    return ResidueMarkers(
        key_ids=[bytes.fromhex(k).decode() for k in data.get("k", [])],
        fragments=list(data.get("f", [])),
    )


def key_markers(
    store: KeyStore, account_id: str, user_id: str, purpose: str, *, before: int | None = None
) -> list[tuple[str, bytes]]:
    """``(key_id, wrapped)`` of every key of an owner and purpose in ``store`` (of the
    generations older than ``before`` when given)."""
    rows = store.owner_keys(account_id, user_id, purpose, before=before)
    return [(row.key_id, row.wrapped) for row in rows]


def files_under(*roots: Path) -> list[Path]:
    """Every regular file below (or at) ``roots`` (a backup, a copied data directory)."""
    found: list[Path] = []
    for root in roots:
        if root.is_file():
            found.append(root)
        elif root.is_dir():
            found.extend(p for p in sorted(root.rglob("*")) if p.is_file())
    return found


def scan_files(paths: Sequence[Path], markers: ResidueMarkers) -> ResidueScan:
    """Every occurrence of ``markers`` in ``paths`` (read as raw bytes, in chunks).

    A file that cannot be read is listed in ``unreadable`` (a running server may also
    remove a file between listing and reading: that one is skipped).
    """
    needles = {f"key id {k}": k.encode() for k in markers.key_ids}
    fragments = {bytes.fromhex(f): f"fragment {f[:8]}" for f in markers.fragments}
    findings: list[ResidueFinding] = []
    total = 0
    unreadable: list[str] = []
    read = 0
    longest = max([FRAGMENT_BYTES, *(len(n) for n in needles.values())])
    for path in paths:
        name = _name(path)
        seen: set[tuple[str, int]] = set()
        try:
            for base, data in _chunks(path, overlap=longest - 1):
                for marker, offset in (
                    *_find_needles(data, needles),
                    *_find_fragments(data, fragments),
                ):
                    if (marker, base + offset) in seen:
                        continue  # found again in the overlap of two chunks
                    seen.add((marker, base + offset))
                    total += 1
                    if len(findings) < _FINDINGS_MAX:
                        findings.append(
                            ResidueFinding(marker=marker, file=name, offset=base + offset)
                        )
        except FileNotFoundError:
            continue
        except OSError:
            unreadable.append(name)
            continue
        read += 1
    return ResidueScan(files_read=read, unreadable=unreadable, occurrences=total, found=findings)


def _name(path: Path) -> str:
    """The file's name with its folder (``pg_wal/0000…``, ``data/confide.db-wal``)."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _chunks(path: Path, *, overlap: int) -> Iterable[tuple[int, bytes]]:
    """``(offset, bytes)`` of ``path`` in chunks that overlap by ``overlap`` bytes."""
    with path.open("rb") as handle:
        base = 0
        tail = b""
        while block := handle.read(_CHUNK):
            data = tail + block
            yield base - len(tail), data
            base += len(block)
            tail = data[-overlap:] if overlap else b""


def _find_needles(data: bytes, needles: dict[str, bytes]) -> Iterable[tuple[str, int]]:
    for marker, needle in needles.items():
        start = data.find(needle)
        while start >= 0:
            yield marker, start
            start = data.find(needle, start + 1)


def _find_fragments(data: bytes, fragments: dict[bytes, str]) -> Iterable[tuple[str, int]]:
    if not fragments or len(data) < FRAGMENT_BYTES:
        return
    heads = np.unique(np.frombuffer(b"".join(f[:8] for f in fragments), dtype="<u8"))
    for align in range(8):
        count = (len(data) - align) // 8
        if count <= 0:
            continue
        words = np.frombuffer(data, dtype="<u8", count=count, offset=align)
        for index in np.flatnonzero(np.isin(words, heads)):
            start = align + 8 * int(index)
            marker = fragments.get(data[start : start + FRAGMENT_BYTES])
            if marker is not None:
                yield marker, start
