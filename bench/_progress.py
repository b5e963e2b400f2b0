"""Progress bars for the benchmarks' long phases, drawn as the command line draws them.

A bar shows counts and rate on standard error when it is a terminal and nothing otherwise
(pipes, logs and tests see nothing), so what a benchmark prints on standard output is the
same with or without one. ``progress_bar`` is the command line's own (a
:data:`~confide.types.Progress` callback, ``show(done, total)``); ``counted`` wraps an
iterable; ``say`` prints a line on standard output without breaking a bar being drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

from confide.cli import progress_bar

__all__ = ["counted", "progress_bar", "say"]

T = TypeVar("T")


def counted(
    items: Iterable[T],
    label: str,
    unit: str,
    *,
    total: int | None = None,
    file: TextIO | None = None,
) -> Iterator[T]:
    """``items``, counted on a bar with their rate (and ``total``, or ``len(items)``).

    The bar goes to ``file`` (standard error by default) only when it is a terminal.
    """
    from tqdm import tqdm

    stream = sys.stderr if file is None else file
    yield from tqdm(
        items,
        desc=label,
        unit=f" {unit}",
        total=total,
        file=stream,
        disable=None,
        dynamic_ncols=True,
    )


def say(line: str) -> None:
    """Print ``line`` on standard output (flushed), clearing and redrawing any bar around it."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stdout):
        print(line, flush=True)
