"""Whatever is typed into make:job / make:cron, the files planned parse and lint clean, or the
request is refused with a message: no input reaches the generated code unescaped."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.scaffolding import PACKAGE, project_copy
from workergen.answers import answer_problem, make_environment
from workergen.questions import load_questionnaire

INJECTION = 'weekly(day="mon\\"+str(__import__(\\"os\\").system(\\"touch pwned\\"))+\\"")'
EXAMPLES = settings(
    max_examples=250,
    deadline=None,
    database=None,  # no .hypothesis/ folder: every run draws afresh
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

anything = st.text(max_size=40)
FIELDS = st.sampled_from(["*", "*/5", "0", "1-5", "mon-fri", "jan,jul", "31", "7", "2", "fri-mon"])
HELPERS = ["every_seconds", "every_minutes", "hourly", "daily", "weekly"]
FAIR_ARGUMENT = st.sampled_from(["", "5", "30", "'02:00'", "'fri', at='7:05'", "day=7"])
wild_field = st.one_of(FIELDS, anything)
wild_argument = st.one_of(
    st.sampled_from(["5", "30", "'02:00'", "'fri'", "'Monday'", "7", "True", "(1,)", "10**9"]),
    anything.map(repr),
    st.integers().map(str),
    anything,
)
wild_call = st.builds(
    lambda helper, args: f"{helper}({', '.join(args)})",
    st.sampled_from([*HELPERS, "nope"]),
    st.lists(
        st.one_of(
            wild_argument,
            st.builds(
                "{}={}".format,
                st.one_of(st.sampled_from(["at", "day", "minute", "seconds"]), anything),
                wild_argument,
            ),
        ),
        max_size=3,
    ),
)
wild_exception = st.one_of(
    st.sampled_from(["ConnectionError", "socket.timeout", "os.nope", "os.getcwd", "None"]),
    st.sampled_from(["nosuchmod.Error", "log.Error", "TimeoutError"]),
    anything.map("socket.{}".format),
    anything,
)
# Per option: values it accepts, and anything at all (with near misses, which find more).
OPTIONS = {
    "name": (
        st.sampled_from(["SendInvoice", "billing/refund", "a-b c", "x"]),
        st.one_of(anything, st.sampled_from(["Ünï", "a\n", "../x", "class"])),
    ),
    "queue": (
        st.sampled_from(["default", "batch"]),
        st.one_of(
            st.sampled_from(["emails", "new-lane_2", "x-dlq", "newlane\n", "dlq"]),
            anything.map("lane{}".format),
            anything,
        ),
    ),
    "add_lane": (st.just(True), st.booleans()),
    "retry_for": (
        st.sampled_from(["", "ConnectionError,socket.timeout"]),
        st.lists(wild_exception, max_size=3).map(",".join),
    ),
    "max_retries": (st.none(), st.one_of(st.none(), st.integers(0, 10**120))),
    "backoff": (st.none(), st.one_of(st.none(), st.integers(1, 10**120))),
    "idempotent": (st.just(False), st.booleans()),
    "schedule": (
        st.sampled_from(["0 * * * *", 'daily(at="02:00")']),
        st.one_of(
            st.tuples(*[FIELDS] * 5).map(" ".join),
            st.lists(wild_field, min_size=4, max_size=6).map(" ".join),
            st.builds("{}({})".format, st.sampled_from(HELPERS), FAIR_ARGUMENT),
            wild_call,
            anything,
            st.just(INJECTION),
        ),
    ),
}
KINDS = {
    "job": ("name", "queue", "add_lane", "retry_for", "max_retries", "backoff", "idempotent"),
    "cron": ("name", "queue", "add_lane", "schedule"),
}


def requests(kind: str) -> st.SearchStrategy[dict]:
    """The options of one make:* call: one of them (or every one) arbitrary, the rest valid."""
    options = KINDS[kind]

    def build(wild: str) -> st.SearchStrategy[dict]:
        return st.fixed_dictionaries(
            {option: OPTIONS[option][1 if wild in (option, "all") else 0] for option in options}
        )

    return st.sampled_from([*options, "all"]).flatmap(build)


@pytest.fixture(scope="module")
def project(render, tmp_path_factory) -> Path:
    return project_copy(render(broker="redis"), tmp_path_factory.mktemp("props") / PACKAGE)


QUESTIONS = load_questionnaire(Path(__file__).resolve().parents[1] / "copier.yml")


def lanes_answer_checked(root: Path, answers: dict) -> list[tuple[str, str]]:
    """Stands in for workergen's rendering of the files that list the lanes.

    What it renders from an accepted answer is tested in tests/test_make_job.py and
    tests/test_answer_rules.py (every accepted answer renders parsing files). Here: whatever
    is typed, a lanes answer reaches the template only if copier.yml's own rule accepts it.
    """
    env = make_environment(QUESTIONS.envops)
    problem = answer_problem(QUESTIONS.get("lanes"), answers["lanes"], answers, env)
    assert problem is None, (answers["lanes"], problem)
    return []


@pytest.fixture(scope="module")
def scaffold(project: Path):
    from workergen_runtime import scaffold as module

    # Rendering the template twice for each drawn lane would take hours.
    before, module.answer_renderer = module.answer_renderer, lanes_answer_checked
    yield module
    module.answer_renderer = before


def plan_or_refusal(scaffold, project: Path, request) -> list | None:
    """The planned files, each checked to parse; None when the request is refused."""
    try:
        planned = scaffold.plan(project, PACKAGE, ("critical", "default", "batch"), request)
    except scaffold.ScaffoldError as refused:
        assert refused.message.strip()
        return None
    for item in planned.files:
        if item.path.endswith(".py"):
            ast.parse(item.content, filename=item.path)
        elif item.path.endswith(".yml"):
            assert isinstance(yaml.safe_load(item.content), dict)
    return planned.files


def lint(project: Path, out: Path, accepted: list[list]) -> None:
    """Write every accepted plan to its own folder and run ruff over them all at once."""
    for number, files in enumerate(accepted):
        for item in files:
            target = out / f"example_{number}" / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item.content, encoding="utf-8")
    (out / "pyproject.toml").write_text((project / "pyproject.toml").read_text())
    for check in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *check], cwd=out, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_any_input_gives_clean_python_or_a_refusal(scaffold, project, tmp_path, kind: str):
    accepted: list[list] = []

    @EXAMPLES
    @given(requests(kind))
    def check(options: dict) -> None:
        files = plan_or_refusal(scaffold, project, scaffold.MakeRequest(kind, **options))
        if files is not None:
            accepted.append(files)

    check()
    assert len(accepted) > 20, "too few examples were accepted to lint what is written"
    lint(project, tmp_path, accepted)
