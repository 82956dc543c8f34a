"""Time the generator's commands against their anchors, as whole processes a user waits for.

    python bench/generator.py [--runs 7] [--cookiecutter-django PATH]

Each figure is the median wall time of N runs of a fresh process, after one
untimed warm-up run; the median CPU time (user and system, the process and
its children) is printed beside it, as it moves less on a loaded machine.
Within a case the contenders run in turn, round after round, so load on the
machine hits them alike. Goals are on wall time, ratios against an anchor
timed in the same run. Cases and goals (issue 15):

  new        `workergen new --defaults` against `copier copy` of the same
             template with the same answers (goal <= 1.0x), and against
             cookiecutter-django with its hooks, defaults too (<= 0.6x); both
             as a user runs it again (its cache of compiled templates filled by
             the warm-up run) and as a first run on a machine (an empty cache)
  make:job   `workergen make:job NAME` and `python -m <package> make:job NAME`
             in a project made at start, each run a new job (<= 250 ms each)
  --version  `workergen --version` against `workergen --help` (<= 1.0x), and
             `workergen --help` against `copier --help` (<= 0.4x)

cookiecutter-django: pass --cookiecutter-django PATH (or set
$WORKERGEN_BENCH_COOKIECUTTER_DJANGO) to a clone at release 2025.09.02, and
have cookiecutter installed (`pip install cookiecutter`):

    git clone https://github.com/cookiecutter/cookiecutter-django
    git -C cookiecutter-django checkout 2025.09.02

Its later releases' post-generation hook runs `uv add`, which resolves the
project's dependencies over the network: not a generator's work. Without the
clone (or without cookiecutter) that contender is skipped, and says why.
Exit status 1 when a goal is missed.

workergen runs as `python -m workergen` of this interpreter, so it is the
workergen this script imports. From a checkout that is the editable install,
whose template both tools render from git. `--wheel` times workergen as a user
installs it instead: it builds a wheel of the checkout (its template committed),
unpacks it, and runs this script again with the unpacked wheel first on
PYTHONPATH. The wheel ships its template compiled (workergen.shipped_compile):
that is what makes a user's first run compile nothing, and a checkout's first
run compile everything.

Python modules are byte-compiled before timing, as pip does when it installs a
package: a checkout's modules are otherwise compiled on every run where
PYTHONDONTWRITEBYTECODE is set.
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import workergen as workergen_package
from workergen.template_source import locate_template

BIN = Path(sys.executable).parent
PROJECT = "bench"
PACKAGE = "bench_app"
COOKIECUTTER_ENV = "WORKERGEN_BENCH_COOKIECUTTER_DJANGO"
MAKE_JOB_GOAL = 0.25
COOKIECUTTER_GOAL = 0.6
"""`new` against cookiecutter-django: 0.8x in issue 15, 0.6x since the thin project."""

Argv = Callable[[Path], Sequence[str]]
"""The command line of one run, given a fresh scratch directory."""


@dataclass(frozen=True)
class Contender:
    name: str
    argv: Argv
    cwd: Path | None = None
    """Where it runs; None for the run's scratch directory."""
    first_run: bool = False
    """Whether each run starts with an empty cache (`XDG_CACHE_HOME`), as on a new machine."""


@dataclass(frozen=True)
class Goal:
    """`ours` within `limit` times `anchor`'s median, or within `limit` seconds without one."""

    ours: str
    limit: float
    anchor: str | None = None


def command(name: str, module: str) -> list[str]:
    """The installed console script, or `python -m` when it is not installed."""
    script = BIN / name
    return [str(script)] if script.exists() else [sys.executable, "-m", module]


WORKERGEN = [sys.executable, "-m", "workergen"]
"""The workergen this script imports (see the module's docstring)."""


def children_cpu() -> float:
    """CPU time (user and system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(contender: Contender) -> tuple[float, float]:
    """Wall time and CPU time of one process, run in a fresh scratch directory."""
    scratch = Path(tempfile.mkdtemp(prefix="workergen-bench-"))
    try:
        argv = contender.argv(scratch)
        cpu = children_cpu()
        started = time.perf_counter()
        subprocess.run(
            argv,
            cwd=contender.cwd or scratch,
            # Temporary files go with the scratch directory: cookiecutter leaves its hooks.
            env={
                **os.environ,
                "TMPDIR": str(scratch),
                **({"XDG_CACHE_HOME": str(scratch / "cache")} if contender.first_run else {}),
            },
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return time.perf_counter() - started, children_cpu() - cpu
    except subprocess.CalledProcessError as error:
        sys.exit(f"{contender.name} failed:\n{error.stderr.decode(errors='replace')}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def timed(contenders: Sequence[Contender], runs: int) -> dict[str, tuple[float, float]]:
    """The median wall and CPU time of each contender, run in turn round after round."""
    for contender in contenders:
        run_once(contender)  # warm-up, not counted
    times: dict[str, list[tuple[float, float]]] = {contender.name: [] for contender in contenders}
    for _ in range(runs):
        for contender in contenders:
            times[contender.name].append(run_once(contender))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def cookiecutter_django(given: str | None) -> tuple[Path | None, str]:
    """The cookiecutter-django clone to time, or None and why it is skipped."""
    if given is None:
        return None, (
            f"skipped: no cookiecutter-django clone given (--cookiecutter-django PATH or "
            f"${COOKIECUTTER_ENV}; see this script's docstring for how to get it)"
        )
    path = Path(given).expanduser().resolve()
    if not (path / "cookiecutter.json").is_file():
        return None, f"skipped: {path} holds no cookiecutter.json (is it a clone?)"
    if not (BIN / "cookiecutter").exists():
        return None, "skipped: cookiecutter is not installed here (pip install cookiecutter)"
    return path, describe_clone(path)


def describe_clone(path: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "describe", "--tags", "--always"], capture_output=True, text=True
    )
    return f"{path} at {done.stdout.strip() or 'an unknown commit'}"


def new_contenders(config: Path, cookiecutter: Path | None) -> list[Contender]:
    """`workergen new`, `copier copy` of the same template, and cookiecutter-django if given."""
    source = locate_template()
    vcs_ref = ["--vcs-ref", source.vcs_ref] if source.vcs_ref else []
    workergen, copier = WORKERGEN, command("copier", "copier")

    def new(d: Path) -> list[str]:
        return [*workergen, "new", str(d / PROJECT), "--defaults", "--package", PACKAGE]

    contenders = [
        Contender("workergen new", new),
        Contender("workergen new, first run", new, first_run=True),
        Contender(
            "copier copy",
            lambda d: [
                *copier,
                "copy",
                "--quiet",
                "--defaults",
                *vcs_ref,
                "--data",
                f"project_name={PROJECT}",
                "--data",
                f"package_name={PACKAGE}",
                str(source.path),
                str(d / PROJECT),
            ],
        ),
    ]
    if cookiecutter is not None:
        # A scratch config, so that cookiecutter keeps its replay files out of $HOME.
        contenders.append(
            Contender(
                "cookiecutter-django",
                lambda d: [
                    str(BIN / "cookiecutter"),
                    "--no-input",
                    "--config-file",
                    str(config),
                    "--output-dir",
                    str(d),
                    str(cookiecutter),
                ],
            )
        )
    return contenders


def make_contenders(project: Path) -> list[Contender]:
    """`make:job` from both entry points, each run naming a new job."""
    names = (f"BenchJob{n}" for n in itertools.count())
    workergen = WORKERGEN
    return [
        Contender("workergen make:job", lambda d: [*workergen, "make:job", next(names)], project),
        Contender(
            f"python -m {PACKAGE} make:job",
            lambda d: [sys.executable, "-m", PACKAGE, "make:job", next(names)],
            project,
        ),
    ]


def report(case: str, timings: dict[str, tuple[float, float]], goals: Sequence[Goal]) -> bool:
    """Print the case's medians and its goals (on wall time); True when every goal is met."""
    print(f"\n{case}")
    for name, (wall, cpu) in timings.items():
        print(f"  {name:<28} {wall * 1000:>7.0f} ms wall {cpu * 1000:>7.0f} ms CPU")
    medians = {name: wall for name, (wall, _) in timings.items()}
    met = True
    for goal in goals:
        if goal.ours not in medians or (goal.anchor and goal.anchor not in medians):
            continue
        ours = medians[goal.ours]
        if goal.anchor is None:
            ok = ours <= goal.limit
            print(f"  {goal.ours} <= {goal.limit * 1000:.0f} ms: {'met' if ok else 'MISSED'}")
        else:
            ratio = ours / medians[goal.anchor]
            ok = ratio <= goal.limit
            print(
                f"  {goal.ours} / {goal.anchor} = {ratio:.2f}x "
                f"(goal <= {goal.limit:.1f}x): {'met' if ok else 'MISSED'}"
            )
        met &= ok
    return met


def run_on_wheel(argv: Sequence[str]) -> int:
    """Build a wheel of this checkout, unpack it, and run this script on it with `argv`."""
    checkout = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="workergen-bench-wheel-") as scratch:
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", scratch],
            cwd=checkout,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (wheel,) = Path(scratch).glob("workergen-*.whl")
        site = Path(scratch) / "site"
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
        print(f"wheel: {wheel.name}")
        sys.stdout.flush()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        }
        return subprocess.run([sys.executable, __file__, *argv], env=env).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="See the docstring at the top of bench/generator.py for the cases and goals.",
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument(
        "--cookiecutter-django",
        default=os.environ.get(COOKIECUTTER_ENV),
        metavar="PATH",
        help=f"a cookiecutter-django clone at release 2025.09.02 (default ${COOKIECUTTER_ENV})",
    )
    parser.add_argument(
        "--wheel",
        action="store_true",
        help="time a wheel built from this checkout (as a user installs it), not the checkout",
    )
    args = parser.parse_args(argv)
    if args.wheel:
        return run_on_wheel([arg for arg in (argv or sys.argv[1:]) if arg != "--wheel"])
    compileall.compile_dir(Path(workergen_package.__file__).parent, quiet=1)  # as pip does
    cookiecutter, about = cookiecutter_django(args.cookiecutter_django)
    source = locate_template()
    print(f"workergen: {Path(workergen_package.__file__).parent}")
    print(f"template: {source.path} (vcs_ref={source.vcs_ref})")
    print(f"cookiecutter-django: {about}")
    print(f"runs: {args.runs} per command, median wall time of whole processes")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} at start")

    workergen = WORKERGEN
    met = True
    with tempfile.TemporaryDirectory(prefix="workergen-bench-") as scratch:
        # workergen's cache of compiled templates is the run's own: the warm-up run
        # fills it for the runs after it; "first run" starts each one empty.
        os.environ["XDG_CACHE_HOME"] = str(Path(scratch) / "cache")
        config = Path(scratch) / "cookiecutter.yaml"
        config.write_text(
            f"cookiecutters_dir: {scratch}/cookiecutters\nreplay_dir: {scratch}/replay\n"
        )
        medians = timed(new_contenders(config, cookiecutter), args.runs)
        met &= report(
            "new",
            medians,
            [
                Goal("workergen new", 1.0, "copier copy"),
                Goal("workergen new", COOKIECUTTER_GOAL, "cookiecutter-django"),
                Goal("workergen new, first run", 1.0, "copier copy"),
                Goal("workergen new, first run", COOKIECUTTER_GOAL, "cookiecutter-django"),
            ],
        )

        project = Path(scratch) / PROJECT
        subprocess.run(
            [*workergen, "new", str(project), "--defaults", "--package", PACKAGE],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        compileall.compile_dir(project, quiet=1)  # as its first run writes them
        contenders = make_contenders(project)
        medians = timed(contenders, args.runs)
        met &= report("make:job", medians, [Goal(each.name, MAKE_JOB_GOAL) for each in contenders])

        medians = timed(
            [
                Contender("workergen --version", lambda d: [*workergen, "--version"]),
                Contender("workergen --help", lambda d: [*workergen, "--help"]),
                Contender("copier --help", lambda d: [*command("copier", "copier"), "--help"]),
            ],
            args.runs,
        )
        met &= report(
            "--version and --help",
            medians,
            [
                Goal("workergen --version", 1.0, "workergen --help"),
                Goal("workergen --help", 0.4, "copier --help"),
            ],
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
