"""Key files shared by processes: several started at once on an empty home agree on one KEK.

Three ``confide serve`` and two ``confide worker`` processes started together on a fresh
``CONFIDE_HOME`` each find no ``master.key`` and make one; the first made must be the one
every process uses (a process keeping a key that is not on file would wrap keys nobody else
can open, and lose them at its next start).
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from confide.config import Settings
from confide.crypto.keyring import KEY_FILE_NAME, kek_id, load_keyring

PROCESSES = 4
ROUNDS = 5


def _load_at_once(homes: list[str], barrier: Barrier, answers: multiprocessing.Queue[str]) -> None:
    """In a child: for each home, wait for the others, then load (making) its key ring."""
    for home in homes:
        barrier.wait(60)
        try:
            answers.put(f"{home} {load_keyring(Settings(home=Path(home))).primary_id}")
        except Exception as exc:  # reported to the parent, which fails the test
            answers.put(f"{home} {type(exc).__name__}")


def test_processes_started_at_once_on_an_empty_home_share_one_key_file(tmp_path: Path) -> None:
    homes = [str(tmp_path / f"home-{n}") for n in range(ROUNDS)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    answers: multiprocessing.Queue[str] = context.Queue()
    children = [
        context.Process(target=_load_at_once, args=(homes, barrier, answers))
        for _ in range(PROCESSES)
    ]
    for child in children:
        child.start()
    got = sorted(answers.get(timeout=120) for _ in range(PROCESSES * ROUNDS))
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    on_file = {
        home: kek_id(bytes.fromhex((Path(home) / KEY_FILE_NAME).read_text().strip()))
        for home in homes
    }
    assert got == sorted(f"{home} {on_file[home]}" for home in homes for _ in range(PROCESSES))
    # Nothing staged is left beside the key.
    assert all(sorted(p.name for p in Path(h).iterdir()) == [KEY_FILE_NAME] for h in homes)
