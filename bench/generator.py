"""Time `workergen new` and `workergen --help` against plain copier, as whole processes.

    python bench/generator.py [--runs 7]

Each figure is the median wall time of N runs of a fresh process, after one
untimed warm-up run, with workergen and copier runs alternating; imports count
as a user feels them. `new` renders the shipped template with --defaults;
copier renders the same template with the same answers. Goals: new <= 1.1x
copier copy, --help <= 0.4x copier --help.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from workergen.template_source import locate_template

BIN = Path(sys.executable).parent
PROJECT = "bench"


def command(name: str, module: str) -> list[str]:
    """The installed console script, or `python -m` when it is not installed."""
    script = BIN / name
    return [str(script)] if script.exists() else [sys.executable, "-m", module]


def run_once(argv_for: Callable[[Path], Sequence[str]]) -> float:
    """Wall time of one process, run in a fresh scratch directory."""
    scratch = Path(tempfile.mkdtemp(prefix="workergen-bench-"))
    try:
        argv = argv_for(scratch)
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def timed_pair(
    ours: Callable[[Path], Sequence[str]], theirs: Callable[[Path], Sequence[str]], runs: int
) -> tuple[list[float], list[float]]:
    """Times of both commands, run alternately so that load on the machine hits both alike."""
    run_once(ours), run_once(theirs)  # warm-up, not counted
    mine, base = [], []
    for _ in range(runs):
        mine.append(run_once(ours))
        base.append(run_once(theirs))
    return mine, base


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    args = parser.parse_args(argv)

    source = locate_template()
    workergen = command("workergen", "workergen")
    copier = command("copier", "copier")
    vcs_ref = ["--vcs-ref", source.vcs_ref] if source.vcs_ref else []

    cases = {
        "new": (
            lambda d: [*workergen, "new", str(d / PROJECT), "--defaults"],
            lambda d: [
                *copier,
                "copy",
                "--quiet",
                "--defaults",
                *vcs_ref,
                "--data",
                f"project_name={PROJECT}",
                str(source.path),
                str(d / PROJECT),
            ],
            1.1,
        ),
        "--help": (lambda d: [*workergen, "--help"], lambda d: [*copier, "--help"], 0.4),
    }
    print(f"template: {source.path} (vcs_ref={source.vcs_ref})")
    print(f"runs: {args.runs} per command, median wall time of whole processes\n")
    print(f"{'case':<8} {'workergen':>10} {'copier':>10} {'ratio':>7} {'goal':>7}  result")
    failed = False
    for case, (ours, theirs, goal) in cases.items():
        mine_times, base_times = timed_pair(ours, theirs, args.runs)
        mine, base = statistics.median(mine_times), statistics.median(base_times)
        ratio = mine / base
        ok = ratio <= goal
        failed |= not ok
        print(
            f"{case:<8} {mine * 1000:>8.0f}ms {base * 1000:>8.0f}ms {ratio:>6.2f}x "
            f"{goal:>6.1f}x  {'met' if ok else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
