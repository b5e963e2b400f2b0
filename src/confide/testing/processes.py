"""Confide commands as real subprocesses (``confide serve``, and any other long-running one),
for tests and benchmarks that kill, restart or run several of them on one database.

A process's standard error is read by a thread of its own (so a chatty server never blocks
on a full pipe); the line that says it is ready releases :meth:`ConfideProcess.wait_ready`,
and its end releases it too, so a process that dies at start-up fails at once instead of
after a timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["ConfideProcess", "confide_env", "serve", "worker"]

_RUNNING = re.compile(r"Uvicorn running on (http://\S+)")
_WORKING = re.compile(r"confide: worker (\S+) running")
_KEEP_LINES = 200


def confide_env(settings: Mapping[str, str], *, src: Path | None = None) -> dict[str, str]:
    """This process's environment without Confide's own variables, plus ``settings``.

    ``src`` (default: the folder this package was imported from) goes first on
    ``PYTHONPATH``, so the child runs the same code as its parent.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CONFIDE_", "XAI_")) and name != "MEMORY_ENCRYPTION_KEY"
    }
    root = src or Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env.update(settings)
    return env


class ConfideProcess:
    """One ``confide <args>`` subprocess; ready once a line of its standard error matches
    ``ready``.

    Args:
        args: the command line after ``confide`` (e.g. ``["serve", "--port", "0"]``).
        env: the child's whole environment (see :func:`confide_env`).
        ready: a pattern of the line that says the process is ready; its first group, if
            any, is kept as :attr:`address`.
        with_stdout: read its standard output into :attr:`lines` too (else it is dropped).
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        ready: re.Pattern[str],
        with_stdout: bool = False,
    ) -> None:
        command = [sys.executable, "-c", "from confide.cli import main; main()", *args]
        self._ready_pattern = ready
        self._ready = threading.Event()
        self.address: str | None = None
        self.lines: deque[str] = deque(maxlen=_KEEP_LINES)
        """The last lines of its standard error (to explain a failure)."""
        self.warnings: deque[str] = deque(maxlen=_KEEP_LINES)
        """Its last warning and error lines, which the access lines would push out of
        :attr:`lines` (they name routes and exception types, never values)."""
        self.process = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if with_stdout else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if with_stdout else subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name="confide-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        output = self.process.stderr or self.process.stdout  # stdout when merged into it
        assert output is not None
        for line in output:
            self.lines.append(line.rstrip())
            if line.startswith(("WARNING", "ERROR", "CRITICAL", "Traceback")):
                self.warnings.append(line.rstrip())
            if not self._ready.is_set():
                match = self._ready_pattern.search(line)
                if match is not None:
                    self.address = match.group(1) if match.groups() else ""
                    self._ready.set()
        self._ready.set()  # ended: whoever waits learns it at once

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def wait_ready(self, timeout: float = 180.0) -> str:
        """Wait until the process says it is ready; its address (``""`` if none).

        Raises:
            RuntimeError: it exited first, or did not get ready within ``timeout``.
        """
        if not self._ready.wait(timeout) or self.address is None:
            tail = "\n".join(list(self.lines)[-20:])
            state = "exited" if self.process.poll() is not None else "is not ready"
            raise RuntimeError(f"confide process {state}:\n{tail}")
        return self.address

    def kill(self) -> None:
        """``kill -9``: no handler, no cleanup, no final checkpoint."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._finish()

    def stop(self, timeout: float = 120.0) -> int:
        """Stop it as Ctrl-C would (background work finishes first); its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        self._finish()
        return code

    def _finish(self) -> None:
        self._reader.join()
        for output in (self.process.stderr, self.process.stdout):
            if output is not None:
                output.close()

    def __enter__(self) -> ConfideProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve(
    env: Mapping[str, str], *, host: str = "127.0.0.1", with_stdout: bool = False
) -> ConfideProcess:
    """Start ``confide serve`` on a free port of ``host``; :meth:`~ConfideProcess.wait_ready`
    gives its base URL once it accepts requests. ``with_stdout`` keeps its standard output
    (where a log handler may write) in :attr:`~ConfideProcess.lines` too."""
    return ConfideProcess(
        ["serve", "--host", host, "--port", "0"],
        env=env,
        ready=_RUNNING,
        with_stdout=with_stdout,
    )


def worker(env: Mapping[str, str]) -> ConfideProcess:
    """Start ``confide worker`` (polling until stopped); :meth:`~ConfideProcess.wait_ready`
    gives its worker id once it runs jobs."""
    return ConfideProcess(["worker"], env=env, ready=_WORKING)
