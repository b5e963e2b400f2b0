"""How long the first tool call takes on a freshly started ``confide serve``, beside the tenth.

Each repeat makes a fresh temporary CONFIDE_HOME, starts ``confide serve`` as a real subprocess
on a free loopback port, waits until ``GET /healthz`` answers (counted as the start-up time),
creates an API key with ``confide keys create``, opens a call session and times ten
``POST /tools/store_memory`` calls one after the other. It prints the medians over the repeats
of the start-up time, the first call, the tenth and the slowest of the ten, then the same
figures as JSON.

    python bench/first_call.py [--repeats 3] [--src DIR ...]

``--src`` runs the procedure against another source tree (put first on PYTHONPATH), for
example an export of an older commit, so two versions are measured in one run; by default the
``src`` folder beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ACCOUNT = "bench"
LINE = "line-1"
CALLS = 10
READY_TIMEOUT = 180.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env(home: Path, src: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CONFIDE_STORAGE_URL", "MEMORY_ENCRYPTION_KEY") and not k.startswith("XAI_")
    }
    env["CONFIDE_HOME"] = str(home)
    env["PYTHONPATH"] = str(src)
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from confide.cli import main; main()", *args]


def _wait_ready(client: httpx.Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"confide serve exited with {server.returncode}")
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # polling a readiness endpoint, in a benchmark only
    raise RuntimeError("confide serve did not become ready in time")


def one_run(src: Path) -> dict[str, Any]:
    """One fresh-home procedure; durations in milliseconds."""
    with tempfile.TemporaryDirectory(prefix="confide-first-call-") as tmp:
        home = Path(tmp) / "home"
        env = _env(home, src)
        port = _free_port()
        started = time.perf_counter()
        server = subprocess.Popen(
            _cli("serve", "--host", "127.0.0.1", "--port", str(port)),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                _wait_ready(client, server)
                ready_ms = (time.perf_counter() - started) * 1000
                token = subprocess.run(
                    _cli("keys", "create", "--account", ACCOUNT),
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                auth = {"Authorization": f"Bearer {token}"}
                session = client.post(
                    "/sessions", json={"accountId": ACCOUNT, "lineId": LINE}, headers=auth
                )
                session.raise_for_status()
                sid = session.json()["callSessionId"]
                calls = []
                for i in range(CALLS):
                    body = {
                        "callSessionId": sid,
                        "lineId": LINE,
                        "accountId": ACCOUNT,
                        "memoryType": "fact",
                        "key": f"bench_fact_{i}",
                        "value": f"The user planted tree number {i} in the garden.",
                    }
                    start = time.perf_counter()
                    response = client.post("/tools/store_memory", json=body, headers=auth)
                    calls.append((time.perf_counter() - start) * 1000)
                    response.raise_for_status()
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    return {"ready_ms": ready_ms, "first_ms": calls[0], "tenth_ms": calls[-1], "calls_ms": calls}


def measure(src: Path, repeats: int) -> dict[str, Any]:
    """Medians over ``repeats`` fresh-home runs against the sources in ``src``."""
    runs = [one_run(src) for _ in range(repeats)]
    return {
        "src": str(src),
        "repeats": repeats,
        "ready_ms": statistics.median(r["ready_ms"] for r in runs),
        "first_ms": statistics.median(r["first_ms"] for r in runs),
        "tenth_ms": statistics.median(r["tenth_ms"] for r in runs),
        "slowest_ms": statistics.median(max(r["calls_ms"]) for r in runs),
        "runs": runs,
    }


def main() -> int:
    """Measure each source tree and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", type=Path, action="append", default=[])
    args = parser.parse_args()
    sources = args.src or [Path(__file__).resolve().parent.parent / "src"]
    results = []
    for src in sources:
        result = measure(src.resolve(), args.repeats)
        results.append(result)
        print(
            f"{result['src']}: ready after {result['ready_ms']:.0f} ms; "
            f"store_memory first {result['first_ms']:.1f} ms, "
            f"tenth {result['tenth_ms']:.1f} ms, slowest of the ten {result['slowest_ms']:.1f} ms "
            f"(medians of {args.repeats})",
            flush=True,
        )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
