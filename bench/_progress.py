"""Progress bars for the benchmarks' long phases, drawn as the command line draws them.

A bar shows counts and rate on standard error when it is a terminal and nothing otherwise
(pipes, logs and tests see nothing), so what a benchmark prints on standard output is the
same with or without one. ``progress_bar`` is the command line's own (a
:data:`~confide.types.Progress` callback, ``show(done, total)``); ``counted`` wraps an
iterable; ``clocked`` shows the seconds a timed coroutine has run; ``say`` prints a line on
standard output without breaking a bar being drawn.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any, TextIO, TypeVar

from confide.cli import progress_bar
from confide.types import Progress

__all__ = ["clocked", "counted", "progress_bar", "say"]

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


async def clocked(work: Coroutine[Any, Any, T], seconds: float, show: Progress) -> T:
    """``work``'s result, the seconds gone (of ``seconds``) shown once a second meanwhile."""
    task = asyncio.ensure_future(work)
    start, whole = time.perf_counter(), round(seconds)
    while not task.done():
        await asyncio.wait({task}, timeout=1.0)
        show(min(whole, round(time.perf_counter() - start)), whole)
    return task.result()


def say(line: str) -> None:
    """Print ``line`` on standard output (flushed), clearing and redrawing any bar around it."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stdout):
        print(line, flush=True)
