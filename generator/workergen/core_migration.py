"""Projects made before the runtime library: `<package>/core/` gives way to workergen-runtime.

Template releases up to 0.1.0 (and the commits after it until the runtime became a
library) rendered the worker runtime into each project as `<package>/core/`, and the
project's own code imported it from there (`from billing.core import job`). The runtime
is now the `workergen-runtime` distribution the project depends on: the same modules,
some of them in a subpackage by concern (`billing.core.flows` is `workergen_runtime.flows`,
`billing.core.schedules` is `workergen_runtime.scheduling.schedules`: MOVED_MODULES), and
the same public API, while the answers `core/project.py` held are `<package>/project.py`.

Copier's update removes the template's files from `core/` and rewrites the files the
template owns. What it leaves is done here, on the update's scratch clone:

- the project's own Python files (jobs, crons, their tests, any module the user added)
  import the runtime by its new name;
- a file of `core/` the user edited or added is not deleted: it is kept under
  `<package>/core_local/`, which nothing imports, and the update reports it, because the
  edit no longer takes effect;
- other files that still name `<package>.core` (a Makefile, a Procfile) are listed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from workergen.releases import TemplateHistory

TEMPLATE_CORE = "template/{{package_name}}/core"
"""Where the template kept the runtime, in the template repository."""
RUNTIME_PACKAGE = "workergen_runtime"
KEPT_DIR = "{package}/core_local"


def leaves_core(history: TemplateHistory, base: str, target: str) -> bool:
    """Whether updating from commit `base` to `target` takes `<package>/core/` away."""
    return history.has_path(base, TEMPLATE_CORE) and not history.has_path(target, TEMPLATE_CORE)


def core_dir(package: str) -> str:
    return f"{package}/core/"


def kept_location(relative: str, package: str) -> str:
    """Where an edited file of `<package>/core/` is kept: `<package>/core_local/...`."""
    core = core_dir(package)
    if not relative.startswith(core):
        return relative
    return f"{KEPT_DIR.format(package=package)}/{relative.removeprefix(core)}"


def free_location(root: Path, relative: str) -> str:
    """`relative`, or `relative.1`, `.2`, ... : the first that names no file under `root`."""
    candidate, number = relative, 0
    while (root / candidate).exists():
        number += 1
        candidate = f"{relative}.{number}"
    return candidate


def leftover_core_files(root: Path, package: str) -> list[str]:
    """Files still under `<package>/core/` after the update: the user's own, sorted."""
    core = root / package / "core"
    if not core.is_dir():
        return []
    return sorted(
        path.relative_to(root).as_posix()
        for path in core.rglob("*")
        if (path.is_file() or path.is_symlink()) and "__pycache__" not in path.parts
    )


def remove_empty_dirs(directory: Path) -> None:
    """Remove `directory` and the directories under it that hold no file."""
    if not directory.is_dir():
        return
    for path in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if not any(directory.iterdir()):
        directory.rmdir()


def rewrite_imports(root: Path, package: str) -> list[str]:
    """Point the project's Python files at the runtime; return those changed, sorted.

    Files under `<package>/core_local/` are left as the user wrote them.
    """
    kept = f"{KEPT_DIR.format(package=package)}/"
    changed = []
    for relative in _project_files(root, "*.py"):
        if relative.startswith(kept):
            continue
        path = root / relative
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = rewrite_source(text, package, _home_package(relative, package))
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(relative)
    return sorted(changed)


def rewrite_source(text: str, package: str, home: str | None = None) -> str:
    """`text` with every `<package>.core...` name the runtime's.

    `<package>.core.project` becomes `<package>.project`; any other `<package>.core[.x]`
    becomes `workergen_runtime[.x]`. Relative imports are resolved from `home` (the
    dotted package the file belongs to; None for a file outside the project's package).
    """
    absolute = re.compile(
        rf"(?<![\w.]){re.escape(package)}\.core(?P<rest>(?:\.[A-Za-z_]\w*)*)(?![\w])"
    )
    text = absolute.sub(lambda match: _runtime_name(package, match["rest"]), text)
    if home is None:
        return text

    def relative(match: re.Match[str]) -> str:
        level = len(match["dots"])
        parts = home.split(".")
        if level > len(parts):
            return match[0]
        target = ".".join([*parts[: len(parts) - level + 1], match["path"]])
        prefix = f"{package}.core"
        if target != prefix and not target.startswith(f"{prefix}."):
            return match[0]
        return f"{match['head']}{_runtime_name(package, target.removeprefix(prefix))}"

    return _RELATIVE.sub(relative, text)


_RELATIVE = re.compile(r"(?m)(?P<head>^[ \t]*from[ \t]+)(?P<dots>\.+)(?P<path>[A-Za-z_][\w.]*)")


# The old core's modules that the runtime keeps in a subpackage by concern (the others,
# e.g. `flows`, `jobs`, `settings`, kept their name): old dotted name -> new one.
MOVED_MODULES = {
    "transports": "brokers.redis.transport",
    "recovery": "brokers.redis.recovery",
    "deadletter.redis": "brokers.redis.deadletters",
    "policies": "brokers.amqp.policies",
    "deadletter.amqp": "brokers.amqp.deadletters",
    "sqs_transport": "brokers.sqs.transport",
    "deadletter.sqs": "brokers.sqs.deadletters",
    "deadlettering": "deadletter.routing",
    "consumer": "worker.consumer",
    "inbound": "worker.inbound",
    "bodies": "worker.bodies",
    "deliveries": "worker.deliveries",
    "pool": "worker.pool",
    "processes": "worker.processes",
    "worker": "worker.start",
    "crons": "scheduling.crons",
    "schedules": "scheduling.schedules",
    "schedule_expr": "scheduling.expressions",
    "scheduler": "scheduling.scheduler",
    "doctor": "ops.doctor",
    "monitor": "ops.monitor",
    "metrics": "ops.metrics",
    "depth": "ops.depth",
    "provision": "ops.provision",
    "http_api": "ops.http_api",
    "cli": "cli.main",
    "dlq_cli": "cli.dlq",
    "schedule_cli": "cli.schedule",
    "provision_cli": "cli.provision",
    "make_cli": "cli.make",
    "http_cli": "cli.http",
}


def _runtime_name(package: str, rest: str) -> str:
    if rest == ".project" or rest.startswith(".project."):
        return f"{package}{rest}"
    for old in sorted(MOVED_MODULES, key=len, reverse=True):
        if rest == f".{old}" or rest.startswith(f".{old}."):
            return f"{RUNTIME_PACKAGE}.{MOVED_MODULES[old]}{rest.removeprefix(f'.{old}')}"
    return f"{RUNTIME_PACKAGE}{rest}"


def _home_package(relative: str, package: str) -> str | None:
    parts = relative.removesuffix(".py").split("/")
    if parts[0] != package:
        return None
    return ".".join(parts[:-1])


def mentions(root: Path, package: str, *, skip: list[str]) -> list[str]:
    """Files other than `skip` and the kept core files that still name the old core."""
    kept = f"{KEPT_DIR.format(package=package)}/"
    pattern = re.compile(rf"(?<![\w.]){re.escape(package)}(?:\.core(?![\w])|/core/)".encode())
    found = []
    for relative in _project_files(root):
        if relative in skip or relative.startswith(kept) or relative == ".copier-answers.yml":
            continue
        try:
            data = (root / relative).read_bytes()
        except OSError:
            continue
        if b"\0" not in data and pattern.search(data):
            found.append(relative)
    return sorted(found)


def _project_files(root: Path, *patterns: str) -> list[str]:
    """Files git tracks or would track under `root` (relative to it) that exist."""
    command = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others"]
    listed = subprocess.run(
        [*command, "--exclude-standard", "--", *patterns],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = dict.fromkeys(name for name in listed.split("\0") if name)
    return [name for name in names if (root / name).is_file()]
