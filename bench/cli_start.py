"""How long ``confide --help`` takes, wall time, as a newcomer's shell sees it.

Runs the installed ``confide`` command (the one beside this Python) ``--runs`` times in fresh
processes and prints the median and the spread.

    python bench/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    """Time the command and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    command = [str(Path(sys.executable).with_name("confide")), "--help"]
    subprocess.run(command, check=True, capture_output=True)  # warm the file cache
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
    print(
        f"confide --help: median {statistics.median(times):.0f} ms, "
        f"min {min(times):.0f} ms, max {max(times):.0f} ms over {args.runs} runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
