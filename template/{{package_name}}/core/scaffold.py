"""`make:job` and `make:cron`: plan every file, check every collision, then write.

Standard library only, and no import of the rest of core at module level: `workergen make:job`
loads this module straight from a project's files and runs it without the project's dependencies,
so both entry points write the same bytes from the same stubs.

Stubs live in `core/stubs/`; a project may override one by putting a file of the same name in a
`stubs/` folder at its root.
"""

from __future__ import annotations

import builtins
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from .naming import GeneratedName, InvalidNameError, normalize_name
from .schedule_expr import InvalidScheduleError, schedule_source

ANSWERS_FILE = ".copier-answers.yml"
STUBS_DIR = Path(__file__).parent / "stubs"
LINE_LENGTH = 100
_LANE = re.compile(r"^[a-z][a-z0-9_-]*$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class ScaffoldError(Exception):
    """A refusal: nothing was written. `report` lists the files examined, when any."""

    def __init__(self, message: str, *, hint: str | None = None, report: list[str] | None = None):
        self.message = message
        self.hint = hint
        self.report = report or []
        super().__init__(message if hint is None else f"{message} {hint}")


@dataclass
class MakeRequest:
    """What the user asked for, as typed on the command line."""

    kind: str
    name: str
    queue: str = "default"
    add_lane: bool = False
    retry_for: str = ""
    max_retries: int | None = None
    backoff: int | None = None
    idempotent: bool = False
    schedule: str = ""
    force: bool = False
    dry_run: bool = False


@dataclass
class PlannedFile:
    """One file to write: `new` files are compared with what exists, `update` files replace it."""

    path: str
    content: str
    update: bool = False
    keep_existing: bool = False


@dataclass
class Plan:
    name: GeneratedName
    files: list[PlannedFile] = field(default_factory=list)


def find_project_root(start: Path) -> Path:
    """The closest folder at or above `start` holding `.copier-answers.yml`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ANSWERS_FILE).is_file():
            return folder
    raise ScaffoldError(
        f"{start} is not inside a generated project (no {ANSWERS_FILE} here or above)",
        hint="Run this from a project made by `workergen new`, or cd into one.",
    )


def read_answer(root: Path, key: str) -> str:
    """One plain answer from `.copier-answers.yml` (no YAML parser needed for these)."""
    text = (root / ANSWERS_FILE).read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(key)}:\s*(.*)$", text, re.MULTILINE)
    if not match:
        raise ScaffoldError(f"{ANSWERS_FILE} has no {key!r} answer")
    return match.group(1).strip().strip("'\"")


def read_stub(root: Path, name: str) -> Template:
    """The stub `name`: the project's own `stubs/<name>` first, else the template's."""
    local = root / "stubs" / name
    return Template((local if local.is_file() else STUBS_DIR / name).read_text(encoding="utf-8"))


def call_arguments(function: str, arguments: list[str]) -> str:
    """The inside of `@function(...)`, on one line when it fits, else one per line."""
    inline = ", ".join(arguments)
    if len(f"@{function}({inline})") <= LINE_LENGTH:
        return inline
    return "\n" + "".join(f"    {argument},\n" for argument in arguments)


def exception_names(raw: str) -> tuple[list[str], set[str]]:
    """`ConnectionError,socket.timeout` gives the names to write and the modules to import."""
    names: list[str] = []
    modules: set[str] = set()
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        if not _DOTTED.match(item):
            raise ScaffoldError(f"--retry-for {item!r} is not an exception name")
        if "." in item:
            modules.add(item.rsplit(".", 1)[0])
        else:
            found = getattr(builtins, item, None)
            if not (isinstance(found, type) and issubclass(found, BaseException)):
                raise ScaffoldError(
                    f"--retry-for {item!r} is not a built-in exception",
                    hint="Write other exceptions with their module, e.g. requests.ConnectionError.",
                )
        names.append(item)
    return names, modules


def import_block(modules: set[str]) -> str:
    """`import` lines in isort order: standard library, then third party, each then a blank."""
    stdlib = sorted(
        {"logging"} | {m for m in modules if m.split(".")[0] in sys.stdlib_module_names}
    )
    other = sorted(modules - set(stdlib))
    blocks = [stdlib, other]
    return "".join("".join(f"import {m}\n" for m in block) + "\n" for block in blocks if block)


def check_lane(queue: str, lanes: tuple[str, ...], add_lane: bool) -> bool:
    """Whether the lane must be added; refuses unknown lanes unless --add-lane."""
    if queue in lanes:
        return False
    if not add_lane:
        raise ScaffoldError(
            f"unknown lane {queue!r}; the project's lanes are: {', '.join(lanes)}",
            hint=f"Pass one of them to --queue, or add the lane with --queue {queue} --add-lane.",
        )
    if not _LANE.match(queue) or queue == "dlq" or queue.endswith("-dlq"):
        raise ScaffoldError(
            f"{queue!r} cannot be a lane: start with a lowercase letter, use lowercase letters, "
            "digits, '_' or '-', and avoid 'dlq' (reserved for dead letters)"
        )
    return True


def lane_updates(root: Path, package: str, lanes: tuple[str, ...]) -> list[PlannedFile]:
    """Add a lane where copier keeps it: the `lanes` answer and the `LANES` it renders."""
    answers = (root / ANSWERS_FILE).read_text(encoding="utf-8")
    answers, found = re.subn(
        r"^lanes:.*$", f"lanes: {','.join(lanes)}", answers, count=1, flags=re.MULTILINE
    )
    project_py = root / package / "core" / "project.py"
    source = project_py.read_text(encoding="utf-8")
    shown = ", ".join(f'"{lane}"' for lane in lanes) + ("," if len(lanes) == 1 else "")
    source, found_too = re.subn(
        r"^LANES: tuple\[str, \.\.\.\] = .*$",
        f"LANES: tuple[str, ...] = ({shown})",
        source,
        count=1,
        flags=re.MULTILINE,
    )
    if not (found and found_too):
        raise ScaffoldError(
            f"cannot find the lanes in {ANSWERS_FILE} and {package}/core/project.py",
            hint="Add the lane to the 'lanes' answer and run `copier update`.",
        )
    return [
        PlannedFile(ANSWERS_FILE, answers, update=True),
        PlannedFile(f"{package}/core/project.py", source, update=True),
    ]


def plan(root: Path, package: str, lanes: tuple[str, ...], request: MakeRequest) -> Plan:
    """Every file the request writes, with its content; raises before anything is written."""
    try:
        name = normalize_name(request.name, request.kind)
    except InvalidNameError as error:
        raise ScaffoldError(str(error)) from None
    add = check_lane(request.queue, lanes, request.add_lane)
    values = {
        "package": package,
        "kind_package": f"{request.kind}s",
        "module": name.module,
        "class_name": name.class_name,
        "task_name": name.task_name(package),
        "queue": request.queue,
        "test_name": f"{name.segments[-1]}_{request.kind}",
    }
    modules: set[str] = set()
    arguments = [f'name="{values["task_name"]}"']
    if request.kind == "cron":
        if request.retry_for or request.max_retries is not None or request.backoff is not None:
            raise ScaffoldError("crons are never retried; drop the retry options")
        if not request.schedule:
            raise ScaffoldError("a cron needs a schedule", hint='Pass --schedule "0 * * * *".')
        try:
            source, helper = schedule_source(request.schedule)
        except InvalidScheduleError as error:
            raise ScaffoldError(
                f"bad --schedule: {error}",
                hint='Examples: --schedule "*/10 * * * *", --schedule \'daily(at="02:00")\'.',
            ) from None
        values["schedule_helper"] = helper
        arguments += [f"schedule={source}", f'queue="{request.queue}"', "without_overlapping=True"]
    else:
        arguments.append(f'queue="{request.queue}"')
        names, modules = exception_names(request.retry_for)
        if names:
            arguments.append(f"retry_for=({', '.join(names)}{',' if len(names) == 1 else ''})")
        if request.max_retries is not None:
            arguments.append(f"max_retries={request.max_retries}")
        if request.backoff is not None:
            arguments.append(f"backoff={request.backoff}")
        if request.idempotent:
            arguments.append("idempotent=True")
    decorator = "job" if request.kind == "job" else "cron_task"
    values["decorator_arguments"] = call_arguments(decorator, arguments)
    values["imports"] = import_block(modules)
    result = Plan(name)
    for init in name.package_paths(package):
        sub = init.rsplit("/", 2)[-2]
        content = read_stub(root, "package_init.py.tmpl").substitute(values, module=sub)
        result.files.append(PlannedFile(init, content, keep_existing=True))
    stub = "job" if request.kind == "job" else "cron"
    result.files.append(
        PlannedFile(
            name.source_path(package), read_stub(root, f"{stub}.py.tmpl").substitute(values)
        )
    )
    result.files.append(
        PlannedFile(name.test_path(), read_stub(root, f"{stub}_test.py.tmpl").substitute(values))
    )
    for item in result.files:
        check_line_length(request.name, item)
    if add:
        result.files += lane_updates(root, package, (*lanes, request.queue))
    return result


def check_line_length(typed: str, item: PlannedFile) -> None:
    """Refuse a name whose files would break the project's line limit (ruff would fail)."""
    for number, line in enumerate(item.content.splitlines(), start=1):
        if len(line) > LINE_LENGTH:
            raise ScaffoldError(
                f"{typed!r} is too long: line {number} of {item.path} would be {len(line)} "
                f"characters (limit {LINE_LENGTH})",
                hint="Choose a shorter name.",
            )


def check_paths(root: Path, planned: Plan) -> None:
    """Refuse paths that would clash with a module, a package or a folder."""
    for item in planned.files:
        target = root / item.path
        if target.is_dir():
            raise ScaffoldError(f"{item.path} is a folder; choose another name")
        for parent in Path(item.path).parents:
            if not parent.name:
                continue
            clashes = [p for p in (str(parent), f"{parent}.py") if (root / p).is_file()]
            if clashes:
                clash = clashes[0]
                raise ScaffoldError(
                    f"{clash} is a module; a package of the same name would hide it",
                    hint="Choose another name for the nesting folder.",
                )


def make(root: Path, request: MakeRequest, *, package: str, lanes: tuple[str, ...]) -> list[str]:
    """Plan, check, then write (unless dry run); return the report lines."""
    planned = plan(root, package, lanes, request)
    check_paths(root, planned)
    report: list[tuple[str, PlannedFile]] = []
    for item in planned.files:
        target = root / item.path
        if item.update:
            action = "update"
        elif not target.exists():
            action = "create"
        elif item.keep_existing or target.read_text(encoding="utf-8") == item.content:
            action = "skip"
        else:
            action = "overwrite" if request.force else "conflict"
        report.append((action, item))
    lines = [f"{PAST[action]} {item.path}" for action, item in report]
    conflicts = [item.path for action, item in report if action == "conflict"]
    if conflicts:
        raise ScaffoldError(
            f"{', '.join(conflicts)} already exist{'s' if len(conflicts) == 1 else ''} "
            "with other content; nothing was written",
            hint="Pass --force to overwrite, or choose another name.",
            report=lines,
        )
    if request.dry_run:
        return [*lines, "dry run: nothing was written"]
    for action, item in report:
        if action in ("create", "overwrite", "update"):
            target = root / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item.content, encoding="utf-8")
    return lines


PAST = {
    "create": "created",
    "skip": "skipped",
    "overwrite": "overwrite",
    "conflict": "conflict",
    "update": "updated",
}


def make_in_project(request: MakeRequest, start: Path | None = None) -> list[str]:
    """Run `make:job` / `make:cron` for the project around `start` (default: here)."""
    root = find_project_root(start or Path.cwd())
    from . import project

    package = read_answer(root, "package_name")
    if package != project.PACKAGE:
        raise ScaffoldError(
            f"{root} holds package {package!r}, not {project.PACKAGE!r}",
            hint=f"Run this command from the project that owns {project.PACKAGE!r}.",
        )
    return make(root, request, package=package, lanes=tuple(project.LANES))
