"""``bench/embed_latency.py --beside``: the load runs while the block runs, and not after."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from embed_latency import beside


def test_a_load_is_running_inside_the_block_and_ended_after_it() -> None:
    with beside("python") as busy:
        assert busy is not None
        assert busy.poll() is None  # it said it is looping and has not stopped
    assert busy.poll() is not None


def test_idle_starts_nothing() -> None:
    with beside("idle") as busy:
        assert busy is None


def test_a_load_is_ended_when_the_block_raises() -> None:
    started = []
    with pytest.raises(KeyError), beside("python") as busy:
        assert busy is not None
        started.append(busy)
        raise KeyError("timed code failed")
    assert started[0].poll() is not None
