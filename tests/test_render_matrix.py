"""Every combination of the answers that change files renders, lints clean and passes its tests."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

BROKERS = ["redis", "rabbitmq", "sqs"]
# Answers a broker asks on top of the shared ones: RabbitMQ, the queue type of its lanes.
BROKER_VARIANTS = {
    "rabbitmq": [{"rabbitmq_queue_type": "classic"}, {"rabbitmq_queue_type": "quorum"}],
}
# What belongs to one broker: a project's tests import none of another broker's
# (its environment may not hold them: boto3 and pycurl come with SQS only).
BROKER_MODULES = {
    "redis": (
        "workergen_runtime.brokers.redis.transport",
        "workergen_runtime.brokers.redis.recovery",
        "workergen_runtime.brokers.redis.deadletters",
    ),
    "rabbitmq": (
        "amqp",
        "workergen_runtime.brokers.amqp.deadletters",
        "workergen_runtime.brokers.amqp.policies",
    ),
    "sqs": (
        "boto3",
        "botocore",
        "pycurl",
        "kombu.transport.SQS",
        "workergen_runtime.brokers.sqs.deadletters",
        "workergen_runtime.brokers.sqs.transport",
    ),
}
RESULT_BACKENDS = ["none", "redis"]
NAMESPACES = ["", "ventas"]

MATRIX = [
    pytest.param(
        {"broker": b, **v, "result_backend": r, "queue_namespace": n},
        id="-".join([b, *v.values(), f"results_{r}", f"ns_{n or 'none'}"]),
    )
    for b in BROKERS
    for v in BROKER_VARIANTS.get(b, [{}])
    for r in RESULT_BACKENDS
    for n in NAMESPACES
] + [
    # The HTTP front door adds files of its own: once per broker is enough.
    pytest.param(
        {"broker": b, "result_backend": r, "queue_namespace": "ventas", "http_api": True},
        id=f"{b}-results_{r}-ns_ventas-http_api",
    )
    for b, r in [("redis", "none"), ("rabbitmq", "redis"), ("sqs", "none")]
]


def imported_modules(tests: Path) -> dict[str, set[str]]:
    """Every module each file under `tests` imports, at the top or inside a function."""
    found: dict[str, set[str]] = {}
    for path in tests.rglob("*.py"):
        names = found.setdefault(str(path.relative_to(tests)), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("answers", MATRIX)
def test_renders_lints_and_passes_its_own_tests(render, answers: dict[str, object]) -> None:
    project = render(**answers)
    package = "billing"
    # The worker runtime is a dependency: the project holds only what its users own.
    assert not (project / package / "core").exists()
    assert (project / package / "app.py").is_file()
    # The runtime's tests stay with the runtime (tests/test_runtime_suite.py runs them):
    # a project's tests are of its own code.
    owned = {path.name for path in (project / "tests").iterdir()} - {"__pycache__"}
    assert owned == {"conftest.py", "test_discovery.py", "jobs"}, sorted(owned)
    assert (project / ".env.example").read_text().count(
        f"QUEUE_NAMESPACE={answers['queue_namespace']}\n"
    ) == 1

    for path in project.rglob("*"):
        if path.suffix in (".yaml", ".yml"):
            list(yaml.safe_load_all(path.read_text()))
        elif path.suffix == ".json":
            json.loads(path.read_text())

    others = [m for b, modules in BROKER_MODULES.items() if b != answers["broker"] for m in modules]
    for path, names in imported_modules(project / "tests").items():
        foreign = {n for n in names if any(n == m or n.startswith(f"{m}.") for m in others)}
        assert not foreign, f"tests/{path} imports another broker's {sorted(foreign)}"

    lint = run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], project)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], project)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr

    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout


def test_same_answers_render_the_same_files(render, tmp_path: Path, copie) -> None:
    first = render(broker="redis", result_backend="none", queue_namespace="")
    again = copie.copy(
        extra_answers={
            "project_name": "billing",
            "broker": "redis",
            "result_backend": "none",
            "queue_namespace": "",
        }
    )
    assert again.exception is None, repr(again.exception)

    # What running the project's tests leaves (the render matrix runs them in this project).
    skipped = {"__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}

    def snapshot(root: Path) -> dict[str, bytes]:
        files = {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not skipped & set(p.parts)
        }
        # A template with uncommitted edits is rendered from a fresh throwaway
        # commit each time; the recorded commit is the template's, not the answers'.
        answers = files[".copier-answers.yml"].splitlines(keepends=True)
        files[".copier-answers.yml"] = b"".join(x for x in answers if not x.startswith(b"_commit:"))
        return files

    assert snapshot(first) == snapshot(again.project_dir)
