"""Workers for a Django project: what `workergen add` finds, asks, writes and edits there.

The project is what `django-admin startproject` makes: `manage.py` names the
settings module (`DJANGO_SETTINGS_MODULE`'s default), whose package holds the
Celery app beside the settings. Written (from `template_add/django/`):
`<settings>/workers.py` (the answers), `<settings>/celery.py` (the app),
`<app>/jobs/__init__.py`, `deploy/workers/`, the pytest set-up when the project
has none, `.env.example` when it has none. Edited, after asking: the settings
package's `__init__.py` (the app loads with Django), `INSTALLED_APPS`, and an
existing `.env.example` (the workers' settings appended).
"""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workergen.add import ANSWERS_FILE, Edit, Left, Plan, append_env_example, compare, read_text
from workergen.errors import UserMessageError
from workergen_runtime.naming import PACKAGE_NAME_RULE

NAME = "django"
RUNTIME_APP = "workergen_runtime.django"
BEAT_APP = "django_celery_beat"
RESULTS_APP = "django_celery_results"
TEST_PLUGIN = "workergen_runtime.django.testing"

INIT_LINES = 'from .celery import app as celery_app\n\n__all__ = ("celery_app",)\n'


@dataclass(frozen=True)
class DjangoProject:
    """A Django project's root, its settings and its apps."""

    root: Path
    settings_module: str
    """`config.settings`: the default `manage.py` gives DJANGO_SETTINGS_MODULE."""
    settings_file: Path
    apps: tuple[str, ...]
    """The app folders at the root (a folder with apps.py), sorted."""

    @property
    def package(self) -> str:
        """The settings package (`config`), where the Celery app goes."""
        return self.settings_module.rpartition(".")[0]


def recognises(root: Path) -> bool:
    """Whether `root` looks like a Django project (it has manage.py)."""
    return (root / "manage.py").is_file()


def inspect(root: Path) -> DjangoProject:
    """The Django project at `root`; a user error when its settings cannot be found."""
    manage = root / "manage.py"
    module = settings_module(read_text(manage))
    if module is None:
        raise UserMessageError(
            f"{manage} sets no default DJANGO_SETTINGS_MODULE",
            hint="workergen add reads the settings module from manage.py's "
            '`os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")`; add it.',
        )
    package, _, name = module.rpartition(".")
    if not package:
        raise UserMessageError(
            f"the settings module {module!r} (manage.py) is not inside a package",
            hint="workergen add puts the Celery app beside the settings, in their package "
            "(the layout `django-admin startproject config .` makes).",
        )
    problem = PACKAGE_NAME_RULE.problem(package)
    if problem is not None:
        raise UserMessageError(
            f"the settings package {package!r} cannot hold the workers: {problem}",
            hint="workergen add puts the Celery app and the answers beside the settings, "
            "so the settings package is the workers' package and follows its rule "
            "(docs/questions.md); a project whose settings package breaks it is not "
            "supported yet.",
        )
    folder = root.joinpath(*package.split("."))
    candidates = (folder / f"{name}.py", folder / name / "__init__.py")
    settings_file = next((path for path in candidates if path.is_file()), None)
    if settings_file is None or not (folder / "__init__.py").is_file():
        raise UserMessageError(
            f"manage.py names the settings {module!r}, but {folder / (name + '.py')} "
            f"or {folder / '__init__.py'} is not there",
            hint="Run workergen add in the folder that holds manage.py and the settings package.",
        )
    apps = tuple(
        sorted(
            child.name
            for child in root.iterdir()
            if child.is_dir() and (child / "apps.py").is_file() and child != folder
        )
    )
    return DjangoProject(root=root, settings_module=module, settings_file=settings_file, apps=apps)


def settings_module(manage_py: str) -> str | None:
    """The default of DJANGO_SETTINGS_MODULE that `manage.py` sets, if it sets one."""
    try:
        tree = ast.parse(manage_py)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setdefault"
            and len(node.args) == 2
        ):
            continue
        key, value = node.args
        if (
            isinstance(key, ast.Constant)
            and key.value == "DJANGO_SETTINGS_MODULE"
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", value.value)
        ):
            return value.value
    return None


def apps(project: DjangoProject) -> tuple[str, ...]:
    """The project's app folders (those with apps.py), sorted."""
    return project.apps


def check_app(project: DjangoProject, app: str) -> None:
    """Refuse an `--app` that is not an app folder of the project, listing those that are."""
    if app in project.apps:
        return
    found = ", ".join(project.apps) if project.apps else "none"
    raise UserMessageError(
        f"{app!r} is not an app of this project (an app is a folder with apps.py here; "
        f"found: {found})",
        hint="Pass --app with one of them, or create one first: `python manage.py startapp NAME`.",
    )


def fixed_answers(project: DjangoProject, app: str) -> dict[str, Any]:
    """The answers workergen add takes from the project rather than asking."""
    name = project.root.name
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9 _-]*", name):
        name = project.package
    return {
        "project_name": name,
        "package_name": project.package,
        "description": f"Background workers for {name}",
        "result_backend": "none",
        "http_api": False,
        "add_to": NAME,
        "django_app": app,
    }


def namespace_default(project: DjangoProject) -> str:
    """The queue namespace offered: the project folder's name, as a namespace may be spelled."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", project.root.name.lower()).strip("-_")
    return slug if re.fullmatch(r"[a-z][a-z0-9_-]*", slug) else project.package


def plan(project: DjangoProject, rendered: Path, answers: Mapping[str, Any]) -> Plan:
    """What adding the workers rendered into `rendered` would do to the project."""
    result = Plan(root=project.root)
    package = project.package.replace(".", "/")
    rendered_env = rendered / ".env.example"
    env_text = rendered_env.read_text(encoding="utf-8")
    env_file = project.root / ".env.example"
    if env_file.exists():
        rendered_env.unlink()
        append_env_example(result, env_file, env_text, docs="docs/django.md")
    _pytest_setup(result, project, rendered)

    added_before = (project.root / ANSWERS_FILE).is_file()

    def owned(relative: str) -> Left | None:
        if relative == ANSWERS_FILE:
            return None
        if relative.endswith("/jobs/__init__.py"):
            return None  # the app has its jobs package already
        if relative.startswith(f"{package}/") and added_before:
            return Left(relative, "kept as you left it (`workergen update` merges into it)", False)
        if relative.startswith("deploy/"):
            return Left(relative, "yours, kept: compare it with docs/django.md's", False)
        return Left(
            relative,
            "is there already and is not workergen's: move what it holds elsewhere "
            "(a Celery app of your own: see docs/django.md), then run workergen add again",
            True,
        )

    compare(result, rendered, owned=owned)
    _edit_init(result, project)
    _edit_installed_apps(result, project, answers)
    return result


def _pytest_setup(result: Plan, project: DjangoProject, rendered: Path) -> None:
    """Leave the project's own pytest set-up alone, saying what it needs."""
    ini = rendered / "pytest.ini"
    if has_pytest_config(project.root) and ini.read_bytes() != _bytes(project.root / "pytest.ini"):
        ini.unlink()
        result.left.append(
            Left(
                "pytest.ini",
                f"not written: the project configures pytest already; set "
                f"DJANGO_SETTINGS_MODULE = {project.settings_module} there (pytest-django)",
                False,
            )
        )
    conftest = rendered / "conftest.py"
    mine = project.root / "conftest.py"
    if mine.exists() and conftest.read_bytes() != _bytes(mine):
        conftest.unlink()
        if TEST_PLUGIN not in read_text(mine):
            result.left.append(
                Left(
                    "conftest.py",
                    f'yours, kept: add `pytest_plugins = ["{TEST_PLUGIN}"]` to it',
                    False,
                )
            )


def has_pytest_config(root: Path) -> bool:
    """Whether the project configures pytest (where pytest itself looks, at its root)."""
    if (root / "pytest.ini").is_file() or (root / ".pytest.ini").is_file():
        return True
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and "[tool.pytest.ini_options]" in read_text(pyproject):
        return True
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(root / name, encoding="utf-8")
        except configparser.Error:
            continue
        if parser.has_section(section):
            return True
    return False


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _edit_init(result: Plan, project: DjangoProject) -> None:
    init = project.root.joinpath(*project.package.split("."), "__init__.py")
    relative = init.relative_to(project.root).as_posix()
    before = read_text(init)
    if "celery_app" in before:
        return
    lines = INIT_LINES
    if re.search(r"^__all__\b", before, re.MULTILINE):
        lines = 'from .celery import app as celery_app\n\n__all__ = (*__all__, "celery_app")\n'
    joint = before if before.endswith("\n") or not before else before + "\n"
    after = joint + ("\n" if joint.strip() else "") + lines
    result.edits.append(
        Edit(
            path=relative,
            before=before,
            after=after,
            by_hand=lines,
        )
    )


def _edit_installed_apps(result: Plan, project: DjangoProject, answers: Mapping[str, Any]) -> None:
    # The jobs are found in the installed apps: the app named by --app is one of them.
    wanted = [str(answers["django_app"]), RUNTIME_APP]
    if answers.get("django_scheduler") == "database":
        wanted.append(BEAT_APP)
    if answers.get("django_results"):
        wanted.append(RESULTS_APP)
    relative = project.settings_file.relative_to(project.root).as_posix()
    before = read_text(project.settings_file)
    after = add_installed_apps(before, wanted)
    missing = [app for app in wanted if not _installed(app, before)]
    by_hand = "INSTALLED_APPS += [" + ", ".join(f'"{app}"' for app in missing) + "]\n"
    if after is None:
        result.left.append(
            Left(
                relative,
                "INSTALLED_APPS is not one list here that workergen can extend; add by hand: "
                + by_hand.strip(),
                True,
            )
        )
    elif after != before:
        result.edits.append(Edit(path=relative, before=before, after=after, by_hand=by_hand))


def add_installed_apps(text: str, apps: list[str]) -> str | None:
    """`text` with `apps` appended to its `INSTALLED_APPS = [...]` (those not there yet).

    None when the settings hold no such list (built from other names, say).
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    value = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "INSTALLED_APPS"
        ):
            value = node.value
    if not isinstance(value, ast.List | ast.Tuple) or value.end_lineno is None:
        return None
    present = [elt.value for elt in value.elts if isinstance(elt, ast.Constant)]
    missing = [app for app in apps if not _listed(app, present)]
    if not missing:
        return text
    lines = text.splitlines(keepends=True)
    quote = _quote_of(text, value)
    close_row = value.end_lineno - 1
    close_line = lines[close_row].encode("utf-8")
    close_col = len(close_line[: value.end_col_offset - 1].decode("utf-8"))
    before_close = lines[close_row][:close_col]
    if value.elts:
        last = value.elts[-1]
        assert last.end_lineno is not None and last.end_col_offset is not None
        row = last.end_lineno - 1
        col = len(lines[row].encode("utf-8")[: last.end_col_offset].decode("utf-8"))
        between = "".join(lines[row : close_row + 1])[col:]
        between = between[: len(between) - (len(lines[close_row]) - close_col)]
        needs_comma = "," not in between.split("#")[0]
        indent = " " * last.col_offset
    else:
        row, col, needs_comma, indent = close_row, close_col, False, "    "
    if value.lineno != value.end_lineno and not before_close.strip():
        added = "".join(f"{indent}{quote}{app}{quote},\n" for app in missing)
        lines.insert(close_row, added)
        if needs_comma:
            lines[row] = lines[row][:col] + "," + lines[row][col:]
        return "".join(lines)
    items = ", ".join(f"{quote}{app}{quote}" for app in missing)
    separator = ", " if value.elts and needs_comma else (" " if value.elts else "")
    trailing = "," if isinstance(value, ast.Tuple) and len(value.elts) + len(missing) == 1 else ""
    lines[close_row] = (
        before_close.rstrip() + separator + items + trailing + lines[close_row][close_col:]
    )
    return "".join(lines)


def _quote_of(text: str, value: ast.List | ast.Tuple) -> str:
    """The quote the list's strings are written with (Django's startproject: single)."""
    for element in value.elts:
        source = ast.get_source_segment(text, element) or ""
        if source[:1] in {"'", '"'}:
            return source[0]
    return '"'


def _listed(app: str, entries: list[object]) -> bool:
    """Whether INSTALLED_APPS `entries` hold `app`, by its name or by its AppConfig's path."""
    return any(entry == app or str(entry).startswith(f"{app}.apps.") for entry in entries)


def _installed(app: str, text: str) -> bool:
    """Whether the settings `text` list `app` in INSTALLED_APPS (as far as a reading tells)."""
    return f'"{app}"' in text or f"'{app}'" in text or f"{app}.apps." in text
