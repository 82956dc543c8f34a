"""Workers for a FastAPI or plain Python service: what `workergen add` finds, asks, writes, edits.

The service is a folder with a `pyproject.toml` or `requirements.txt` and a
Python package beside it. It is a FastAPI service when FastAPI is among its
dependencies or one of its modules makes a `FastAPI(` app; plain Python
otherwise. (A folder with manage.py is Django's: that kind is tried first.)

Written (from `template_add/service/`, whose files are the generated project's,
included): a worker package of its own (`<package>/`: the answers, the binding,
`app.py`, `__main__.py`, `jobs/` with a first job, `crons/`), its tests under
`tests/jobs/`, `deploy/workers/` (systemd units of `python -m <package>`),
`.env.example` when the service has none; for FastAPI, an example route module
in the app's package (`<app>/worker_routes.py`) for the user to include. Edited,
after asking: the service's dependencies (`workergen-runtime` in pyproject.toml
or requirements.txt) and an existing `.env.example`. Never the app module.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workergen.add import ANSWERS_FILE, Edit, Left, Plan, append_env_example, compare, read_text
from workergen.errors import UserMessageError

NAME = "service"
FASTAPI = "fastapi"
PLAIN = "plain"
REQUIREMENTS = ("requirements.txt", "requirements.in")
_SKIPPED = {"tests", "test", "docs", "build", "dist", "node_modules", "site-packages"}
_RUNTIME = re.compile(r"^\s*[\"']?workergen[-_.]runtime\b", re.IGNORECASE | re.MULTILINE)
_PROJECT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9 _-]*")


@dataclass(frozen=True)
class Service:
    """A service's root, how it declares its dependencies, its packages and its framework."""

    root: Path
    dependencies: str
    """`pyproject.toml` (its [project] table) or a requirements file, relative to the root."""
    packages: tuple[str, ...]
    """The Python packages at the root (folders with __init__.py), sorted."""
    framework: str
    """`fastapi` or `plain`."""
    app_packages: tuple[str, ...]
    """The packages whose modules make a `FastAPI(` app, sorted."""


def recognises(root: Path) -> bool:
    """Whether `root` holds a pyproject.toml or requirements file and a Python package."""
    declared = (root / "pyproject.toml").is_file() or any(
        (root / name).is_file() for name in REQUIREMENTS
    )
    return declared and bool(_packages(root))


def inspect(root: Path) -> Service:
    """The service at `root`: where its dependencies are, its packages, its framework.

    A user error when its pyproject.toml is not valid TOML.
    """
    dependencies = _dependency_file(root)
    packages = _packages(root)
    app_packages = tuple(name for name in packages if _makes_fastapi_app(root / name))
    fastapi = bool(app_packages) or _depends_on_fastapi(root, dependencies)
    return Service(
        root=root,
        dependencies=dependencies,
        packages=packages,
        framework=FASTAPI if fastapi else PLAIN,
        app_packages=app_packages,
    )


def _packages(root: Path) -> tuple[str, ...]:
    return tuple(
        sorted(
            child.name
            for child in root.iterdir()
            if child.is_dir()
            and child.name.isidentifier()
            and child.name not in _SKIPPED
            and (child / "__init__.py").is_file()
        )
    )


def _dependency_file(root: Path) -> str:
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(read_text(pyproject))
        except tomllib.TOMLDecodeError as exc:
            raise UserMessageError(
                f"{pyproject} is not valid TOML ({exc})",
                hint='Fix it (`python -c \'import tomllib; tomllib.load(open("pyproject.toml", '
                '"rb"))\'` shows where), then run workergen add again.',
            ) from None
        if isinstance(data.get("project"), dict):
            return "pyproject.toml"
    for name in REQUIREMENTS:
        if (root / name).is_file():
            return name
    return "pyproject.toml"


def _depends_on_fastapi(root: Path, dependencies: str) -> bool:
    text = read_text(root / dependencies)
    if dependencies == "pyproject.toml":
        project = tomllib.loads(text).get("project", {})
        names = [str(item) for item in project.get("dependencies", [])]
    else:
        names = text.splitlines()
    return any(re.match(r"\s*fastapi\b", name, re.IGNORECASE) for name in names)


def _makes_fastapi_app(package: Path) -> bool:
    """Whether a module of `package` calls `FastAPI(...)` (parsed, not imported)."""
    for module in sorted(package.rglob("*.py")):
        text = module.read_text(encoding="utf-8", errors="replace")
        if "FastAPI(" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Name) and node.func.id == "FastAPI")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "FastAPI")
            ):
                return True
    return False


def apps(project: Service) -> tuple[str, ...]:
    """The packages the example routes may go in: those that make the FastAPI app."""
    return project.app_packages or project.packages


def default_app(project: Service) -> str:
    """The package of the example routes, when the service leaves no choice; "" for plain Python.

    A user error naming the candidates when there is a choice (pass --app).
    """
    if project.framework == PLAIN:
        return ""
    choices = apps(project)
    if len(choices) == 1:
        return choices[0]
    makes = "make a FastAPI app" if project.app_packages else "are this service's packages"
    raise UserMessageError(
        f"which package holds your FastAPI app? {', '.join(choices)} {makes}",
        hint="Pass --app PACKAGE: the example routes (worker_routes.py) go in it.",
    )


def check_app(project: Service, app: str) -> None:
    """Refuse an `--app` that is not a package of the service, listing those that are."""
    if (project.framework == PLAIN and not app) or app in project.packages:
        return
    found = ", ".join(apps(project)) or "none"
    raise UserMessageError(
        f"{app!r} is not a package of this service (found: {found})",
        hint="Pass --app with the package that holds your FastAPI app: "
        "the example routes go in it.",
    )


def question_defaults(project: Service) -> dict[str, str]:
    """The defaults offered for the questions asked: the worker package is `<service>_workers`."""
    return {"package_name": f"{_snake(project.root.name) or 'service'}_workers"}


def fixed_answers(project: Service, app: str) -> dict[str, Any]:
    """The answers workergen add takes from the service rather than asking."""
    name = project.root.name
    if not _PROJECT_NAME.fullmatch(name):
        name = _snake(name) or "service"
    return {
        "project_name": name,
        "description": f"Background workers for {name}",
        "http_api": False,
        "add_to": NAME,
        "service_framework": project.framework,
        "service_package": app if project.framework == FASTAPI else "",
    }


def namespace_default(project: Service) -> str:
    """The queue namespace offered: the service folder's name, as a namespace may be spelled."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", project.root.name.lower()).strip("-_")
    return slug if re.fullmatch(r"[a-z][a-z0-9_-]*", slug) else "service"


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_").lstrip("0123456789_")


def plan(project: Service, rendered: Path, answers: Mapping[str, Any]) -> Plan:
    """What adding the workers rendered into `rendered` would do to the service."""
    result = Plan(root=project.root)
    env_file = project.root / ".env.example"
    if env_file.exists():
        rendered_env = rendered / ".env.example"
        env_text = rendered_env.read_text(encoding="utf-8")
        append_env_example(result, env_file, env_text, docs="docs/existing-projects.md")
        rendered_env.unlink()
    package = answers["package_name"]
    added_before = (project.root / ANSWERS_FILE).is_file()

    def owned(relative: str) -> Left | None:
        if relative == ANSWERS_FILE:
            return None
        if added_before:
            return Left(relative, "kept as you left it (`workergen update` merges into it)", False)
        if relative.startswith(("deploy/", "tests/")) or relative.endswith("/worker_routes.py"):
            return Left(relative, "yours, kept: compare it with docs/existing-projects.md", False)
        return Left(
            relative,
            f"is there already and is not workergen's: choose another worker package "
            f"(--data package_name=NAME; {package!r} now), then run workergen add again",
            True,
        )

    compare(result, rendered, owned=owned)
    _edit_dependencies(result, project, requirement(answers))
    return result


def requirement(answers: Mapping[str, Any]) -> str:
    """The service's requirement on the runtime: the template's range, the extras it needs."""
    extras = [
        *(["http"] if answers.get("service_framework") == FASTAPI else []),
        *(["sqs"] if answers.get("broker") == "sqs" else []),
    ]
    return f"workergen-runtime{'[' + ','.join(extras) + ']' if extras else ''}{runtime_range()}"


def runtime_range() -> str:
    """The release series a generated project depends on (template/pyproject.toml.jinja's)."""
    from workergen.template_source import locate_template

    source = locate_template().path / "template" / "pyproject.toml.jinja"
    found = re.search(r'"workergen-runtime\{\{.*\}\}([^"]+)",', source.read_text(encoding="utf-8"))
    if found is None:
        raise UserMessageError(
            f"{source} names no range of workergen-runtime",
            hint="The installed workergen is damaged: reinstall it.",
        )
    return found.group(1)


def _edit_dependencies(result: Plan, project: Service, wanted: str) -> None:
    path = project.root / project.dependencies
    before = read_text(path) if path.is_file() else ""
    if _RUNTIME.search(_dependency_lines(before, project.dependencies)):
        return
    if project.dependencies == "pyproject.toml":
        after = add_project_dependency(before, wanted)
        if after is None:
            result.left.append(
                Left(
                    "pyproject.toml",
                    f"its [project] has no dependencies list workergen can extend; "
                    f'add "{wanted}" to your dependencies by hand',
                    False,
                )
            )
            return
    else:
        joint = before if before.endswith("\n") or not before else before + "\n"
        after = f"{joint}{wanted}\n"
    result.edits.append(
        Edit(path=project.dependencies, before=before, after=after, by_hand=f'"{wanted}"')
    )


def _dependency_lines(text: str, name: str) -> str:
    """The dependencies as lines: the [project] list of a pyproject.toml, or the file itself."""
    if name != "pyproject.toml":
        return text
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return ""
    return "\n".join(str(item) for item in project.get("dependencies", []))


def add_project_dependency(text: str, wanted: str) -> str | None:
    """`text` (a pyproject.toml) with `wanted` appended to [project]'s `dependencies = [...]`.

    None when [project] has no such list to extend (dependencies are `dynamic`, say),
    or when the result would not read back as that list with `wanted` last.
    """
    after = _appended(text, wanted)
    try:
        project = tomllib.loads(after or "").get("project", {})
    except tomllib.TOMLDecodeError:
        return None
    found = project.get("dependencies")
    return after if isinstance(found, list) and found[-1:] == [wanted] else None


def _appended(text: str, wanted: str) -> str | None:
    table = re.search(r"^\[project\][ \t]*(#.*)?$", text, re.MULTILINE)
    if table is None:
        return None
    end = re.compile(r"^\[", re.MULTILINE).search(text, table.end())
    key = re.compile(r"^dependencies[ \t]*=[ \t]*\[", re.MULTILINE).search(
        text, table.end(), end.start() if end else len(text)
    )
    close = None if key is None else _closing_bracket(text, key.end())
    if key is None or close is None:
        return None
    items = text[key.end() : close]
    kept = items.rstrip()
    last_line = kept.splitlines()[-1] if kept.strip() else ""
    if kept.strip() and not kept.endswith(",") and "#" not in last_line:
        kept += ","
    if "\n" in items:
        return f'{text[: key.end()]}{kept}\n    "{wanted}",\n{text[close:]}'
    separator = " " if kept.strip() else ""
    return f'{text[: key.end()]}{kept}{separator}"{wanted}"{text[close:]}'


def _closing_bracket(text: str, start: int) -> int | None:
    """Where the array opened just before `start` closes (its strings and comments skipped)."""
    depth, index, quote = 1, start, ""
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
            continue
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None


def next_commands(answers: Mapping[str, Any]) -> list[str]:
    """The commands that take the service to a running worker."""
    package = answers["package_name"]
    commands = [
        "python -m pip install -e .   (or -r requirements.txt): the workergen-runtime requirement",
        "set BROKER_URL (and the other settings of .env.example) in .env or the environment",
        f"python -m {package} queue work        # in one terminal",
        f"python -m {package} make:job SendInvoice",
    ]
    if answers.get("service_framework") == FASTAPI:
        app = answers.get("service_package", "app")
        commands.append(
            f"in your app: from {app}.worker_routes import router as worker_routes; "
            "app.include_router(worker_routes)"
        )
    return commands
