"""`workergen add`: give an existing project workergen's workers, in its own folder.

The kind of project is found first (`detect`; Django today, `workergen.add.django`),
then the questions are asked like `workergen new` asks them (the same copier.yml,
flags and prompts), the kind's files are rendered from the shipped template into
a scratch directory and compared with the project: the whole plan is made and
checked before anything is written. A second run reads the answers the first
recorded (`.copier-answers.workergen.yml`) and changes only what is missing.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from workergen.add import ANSWERS_FILE, Edit, Kind, Plan, write
from workergen.add import django as django_kind
from workergen.add import service as service_kind
from workergen.answers import collect_answers, flag_for, make_environment, merge_given, parse_data
from workergen.commands.new import terminal_is_interactive
from workergen.errors import UserMessageError
from workergen.options import (
    QUESTION_FLAGS,
    Broker,
    Data,
    Defaults,
    Lanes,
    Pretend,
    QueueNamespace,
)
from workergen.provenance import ANSWERS_FILE as RENDERED_ANSWERS
from workergen.provenance import read_answers, record_provenance, shipped_provenance
from workergen.questions import Question, Questionnaire, load_questionnaire
from workergen.render import render_project
from workergen.runtime_source import checkout_runtime
from workergen.template_source import locate_template

KINDS: tuple[Kind, ...] = (django_kind, service_kind)
"""The kinds of project `workergen add` knows, tried in this order."""

ADD_FLAGS: dict[str, str] = {
    **{name: QUESTION_FLAGS[name] for name in ("broker", "queue_namespace", "lanes")},
    "django_app": "--app",
    "django_scheduler": "--scheduler",
    "django_results": "--django-results",
}
"""The flag that answers each question `workergen add` asks."""

# Answers `workergen add` takes from the project; `--data` may not say otherwise.
FROM_THE_PROJECT = (
    "add_to",
    "django_app",
    "package_name",
    "service_framework",
    "service_package",
)

_ANSWERS = "Answers (see docs/django.md)"

App = Annotated[
    str | None,
    typer.Option(
        "--app",
        metavar="APP",
        help="The Django app whose jobs/ package holds the jobs (a folder with apps.py); "
        "in a FastAPI service, the package that creates the app.",
        show_default=False,
        rich_help_panel=_ANSWERS,
    ),
]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="crons|database",
        help="Where the crons' schedules are kept: in code (crons) or in the database "
        "(database: django-celery-beat).",
        show_default=False,
        rich_help_panel=_ANSWERS,
    ),
]
DjangoResults = Annotated[
    bool | None,
    typer.Option(
        "--django-results/--no-django-results",
        help="Keep job results in the database (django-celery-results); default: no results.",
        show_default=False,
        rich_help_panel=_ANSWERS,
    ),
]
Yes = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Make the edits of your files (shown as diffs) without asking.",
    ),
]


def add(
    app: App = None,
    broker: Broker = None,
    namespace: QueueNamespace = None,
    lanes: Lanes = None,
    scheduler: Scheduler = None,
    django_results: DjangoResults = None,
    data: Data = None,
    defaults: Defaults = False,
    yes: Yes = False,
    pretend: Pretend = False,
) -> None:
    """Add workergen's workers to the project in the current folder (Django, FastAPI, Python).

    In a Django project, run it where manage.py is. It writes only files of its own (the Celery app
    beside the settings, <settings>/workers.py with the answers, <app>/jobs/,
    deploy/workers/, the pytest set-up and .env.example when the project has
    none) and never overwrites a file of yours. Edits of your files (the settings
    package's __init__.py, INSTALLED_APPS, an existing .env.example) are shown as
    diffs and asked, or made with --yes; a declined edit is listed with what to
    add by hand, and the exit is non-zero. A second run changes only what is
    missing. The answers go to .copier-answers.workergen.yml, so that
    `workergen update` (or `copier update --answers-file
    .copier-answers.workergen.yml`) brings template fixes later. See docs/django.md.

    In a FastAPI or plain Python service (a pyproject.toml or requirements.txt
    beside a package), it writes a worker package of its own (<service>_workers/,
    `python -m <package> ...`), its tests in tests/jobs/, deploy/workers/ and,
    for FastAPI, example routes in --app's package; it asks to add
    workergen-runtime to your dependencies. See docs/existing-projects.md.

    Example: workergen add --app accounts --broker redis --defaults
    """
    root = Path.cwd().resolve()
    kind = detect(root)
    project = kind.inspect(root)
    interactive = terminal_is_interactive()
    flags = {
        "broker": broker,
        "queue_namespace": namespace,
        "lanes": lanes,
        "django_scheduler": scheduler,
        "django_results": django_results,
    }
    source = locate_template()
    questionnaire = load_questionnaire(source.copier_yml)
    recorded = root / ANSWERS_FILE
    if recorded.is_file():
        answers = _recorded_answers(root, app, flags)
    else:
        answers = _ask(
            kind,
            questionnaire,
            project,
            app=app,
            flags=flags,
            data=data,
            defaults=defaults,
            interactive=interactive,
        )
    with tempfile.TemporaryDirectory(prefix="workergen-add-") as scratch:
        rendered = Path(scratch) / "project"
        render_project(source, rendered, answers)
        record_provenance(rendered, shipped_provenance(source))
        (rendered / RENDERED_ANSWERS).rename(rendered / ANSWERS_FILE)
        plan = kind.plan(project, rendered, answers)
    raise typer.Exit(_carry_out(plan, answers, yes=yes, pretend=pretend))


def detect(root: Path) -> Kind:
    """The kind of project at `root`; a user error when it is none workergen add knows."""
    for kind in KINDS:
        if kind.recognises(root):
            return kind
    raise UserMessageError(
        f"{root} is not a project workergen add knows: no manage.py here (a Django project), "
        "nor a pyproject.toml or requirements.txt beside a Python package (a FastAPI or "
        "plain Python service)",
        hint="Run workergen add in the folder that holds manage.py, or your service's "
        "pyproject.toml and package (docs/existing-projects.md). "
        "For a worker project of its own, run `workergen new NAME`.",
    )


def _recorded_answers(root: Path, app: str | None, flags: dict[str, Any]) -> dict[str, Any]:
    """The answers of an earlier add; a user error when a flag says otherwise."""
    recorded = {
        key: value for key, value in read_answers(root, ANSWERS_FILE).items() if key[:1] != "_"
    }
    for name, value in {**flags, "django_app": app}.items():
        if value is not None and recorded.get(name) != value:
            raise UserMessageError(
                f"the workers were added with {name} = {recorded.get(name)!r} "
                f"({ANSWERS_FILE}); {ADD_FLAGS[name]} says {value!r}",
                hint=f"To change an answer, run `copier update --answers-file {ANSWERS_FILE} "
                f"--data {name}=VALUE` (docs/django.md).",
            )
    return recorded


def _ask(
    kind: Kind,
    questionnaire: Questionnaire,
    project: Any,
    *,
    app: str | None,
    flags: dict[str, Any],
    data: list[str] | None,
    defaults: bool,
    interactive: bool,
) -> dict[str, Any]:
    """Every answer of a first add: the kind's own, and those asked like `workergen new`."""
    if app is None and hasattr(kind, "default_app"):
        app = kind.default_app(project)
    if app is None:
        app = _choose_app(kind.apps(project), interactive=interactive, defaults=defaults)
    kind.check_app(project, app)
    fixed = kind.fixed_answers(project, app)
    questionnaire = _with_default(questionnaire, "queue_namespace", kind.namespace_default(project))
    for name, value in getattr(kind, "question_defaults", lambda _: {})(project).items():
        questionnaire = _with_default(questionnaire, name, value)
    given = merge_given(
        questionnaire, flags=flags, data=parse_data(data or ()), flag_names=ADD_FLAGS
    )
    for name in FROM_THE_PROJECT:
        if name in given and name in fixed and given[name] != fixed[name]:
            raise UserMessageError(
                f"{name} is taken from the project ({fixed[name]!r}); --data says {given[name]!r}",
                hint="Leave it out: workergen add reads it from the project's files and --app.",
            )
    return collect_answers(
        questionnaire,
        {**fixed, **given},
        env=make_environment(questionnaire.envops),
        use_defaults=defaults,
        ask=_ask_on_terminal if interactive else None,
        flag_names=ADD_FLAGS,
        base_context={"_folder_name": project.root.name, "add_to": fixed["add_to"]},
    )


def _choose_app(apps: Sequence[str], *, interactive: bool, defaults: bool) -> str:
    if len(apps) == 1 and defaults:
        return str(apps[0])
    if interactive and apps:
        import questionary

        return str(questionary.select("The app that holds the jobs", choices=list(apps)).ask())
    found = ", ".join(apps) if apps else "none yet: `python manage.py startapp NAME`"
    raise UserMessageError(
        "which app holds the jobs? Pass --app APP",
        hint=f"The apps of this project (folders with apps.py): {found}.",
    )


def _with_default(questionnaire: Questionnaire, name: str, default: str) -> Questionnaire:
    from dataclasses import replace

    questions = tuple(
        replace(question, default=default, has_default=True) if question.name == name else question
        for question in questionnaire.questions
    )
    return replace(questionnaire, questions=questions)


def _ask_on_terminal(question: Question, default: Any, validate: Any) -> Any:
    from workergen.prompts import ask_question

    return ask_question(question, default, validate, flag=flag_for(question, ADD_FLAGS))


def _carry_out(plan: Plan, answers: dict[str, Any], *, yes: bool, pretend: bool) -> int:
    """Show the plan, ask about the edits, write; the exit code."""
    blocked = plan.blocked
    if blocked:
        typer.secho(
            "workergen add changed nothing: these files are in the way.", fg="red", err=True
        )
        for item in blocked:
            typer.secho(f"  {item.path} {item.why}", fg="red", err=True)
        return 1
    for item in plan.left:
        typer.echo(f"  left     {item.path}: {item.why}")
    if plan.changes_nothing:
        typer.secho(
            f"Nothing to change: the workers are added already ({ANSWERS_FILE}).", fg="green"
        )
        return 0
    if pretend:
        for new in plan.create:
            typer.echo(f"  create   {new.path}")
        for edit in plan.edits:
            typer.echo(f"  edit     {edit.path}\n{edit.diff()}")
        typer.echo("Pretend run: nothing was written.")
        return 0
    accepted, declined = _confirm_edits(plan.edits, yes=yes)
    write(plan, accepted)
    for new in plan.create:
        typer.echo(f"  {typer.style('create', fg='green')}   {new.path}")
    for edit in accepted:
        typer.echo(f"  {typer.style('edit', fg='green')}     {edit.path}")
    if declined:
        typer.secho(
            "\nThe workers are added, but these edits were declined; make them by hand:",
            fg="yellow",
            err=True,
        )
        for edit in declined:
            typer.secho(f"  {edit.path}: add\n{_indent(edit.by_hand)}", fg="yellow", err=True)
        typer.secho("Or run `workergen add --yes` again.", fg="yellow", err=True)
        return 1
    typer.echo("\nNext steps:")
    for line in next_commands(answers):
        typer.echo(f"  {line}")
    return 0


def _confirm_edits(edits: list[Edit], *, yes: bool) -> tuple[list[Edit], list[Edit]]:
    accepted, declined = [], []
    for edit in edits:
        typer.echo(f"\nworkergen add edits {edit.path}:\n{edit.diff()}")
        if yes:
            accepted.append(edit)
            continue
        try:
            agreed = typer.confirm(f"Edit {edit.path}?", default=False)
        except typer.Abort:
            agreed = False
        (accepted if agreed else declined).append(edit)
    return accepted, declined


def _indent(text: str) -> str:
    return "".join(f"      {line}\n" for line in text.splitlines())


def next_commands(answers: dict[str, Any]) -> list[str]:
    """The commands that take the project to a running worker."""
    if answers.get("add_to") == service_kind.NAME:
        return service_kind.next_commands(answers)
    extras = ["django", *(["sqs"] if answers.get("broker") == "sqs" else [])]
    requirement = f"[{','.join(extras)}]"
    runtime = checkout_runtime()
    if runtime is None:
        runtime_spec = shlex.quote(f"workergen-runtime{requirement}")
    else:
        runtime_spec = f"-e {shlex.quote(f'{runtime}{requirement}')}"
    extra_packages = ["pytest-django"]
    if answers.get("django_scheduler") == "database":
        extra_packages.append("django-celery-beat")
    if answers.get("django_results"):
        extra_packages.append("django-celery-results")
    app = answers.get("django_app", "APP")
    commands = [
        f"python -m pip install {runtime_spec} {' '.join(extra_packages)}",
        "set BROKER_URL (and the other settings of .env.example) in .env or the environment",
    ]
    if answers.get("django_scheduler") == "database" or answers.get("django_results"):
        commands.append("python manage.py migrate")
    commands += [
        "python manage.py workergen queue work        # in one terminal",
        f"python manage.py workergen make:job SendWelcome --app {app}",
    ]
    return commands
