"""`workergen new PATH`: create a worker project from the shipped template."""

from __future__ import annotations

import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import typer

from workergen.answers import collect_answers, flag_for, make_environment, merge_given, parse_data
from workergen.options import (
    QUESTION_FLAGS,
    Broker,
    Data,
    Defaults,
    Description,
    Force,
    Lanes,
    PackageName,
    Pretend,
    ProjectName,
    QueueNamespace,
    ResultBackend,
    TargetPath,
    TemplateOption,
    VcsRef,
)
from workergen.provenance import (
    Provenance,
    record_provenance,
    shipped_provenance,
    template_url,
)
from workergen.questions import Question, load_questionnaire
from workergen.render import RenderedFile, check_target, render_project
from workergen.runtime_source import install_command
from workergen.template_source import (
    TemplateSource,
    chosen_version,
    locate_template,
    open_history,
)


def terminal_is_interactive() -> bool:
    """Whether there is a person at a terminal to answer questions."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def new(
    path: TargetPath,
    name: ProjectName = None,
    package: PackageName = None,
    description: Description = None,
    broker: Broker = None,
    namespace: QueueNamespace = None,
    lanes: Lanes = None,
    result_backend: ResultBackend = None,
    data: Data = None,
    defaults: Defaults = False,
    force: Force = False,
    pretend: Pretend = False,
    template: TemplateOption = None,
    vcs_ref: VcsRef = None,
) -> None:
    """Create a worker project in PATH.

    Questions not answered by a flag are asked on a terminal; without one,
    pass them as flags or use --defaults. The project records the template
    repository's address and the template version (see docs/updating.md), so
    that `workergen update` and `copier update` work in it on any machine.
    """
    target = path.expanduser().resolve()
    # Refuse a bad target before asking anything.
    check_target(target, force=force)

    ask = _ask_on_terminal if terminal_is_interactive() else None
    with ExitStack() as stack:
        shipped: Callable[[], Provenance] | None = None
        if template is None and vcs_ref is None:
            source = locate_template()
            # Naming the installed version may run git: it runs while the answers are
            # checked, and is waited for before any question is asked or file written.
            shipped = in_background(shipped_provenance, source)
            if ask is not None:
                shipped()
        else:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="workergen-")))
            source, provenance = chosen_template(template, vcs_ref, scratch)
        questionnaire = load_questionnaire(source.copier_yml)
        given = merge_given(
            questionnaire,
            flags={
                "project_name": name,
                "package_name": package,
                "description": description,
                "broker": broker,
                "queue_namespace": namespace,
                "lanes": lanes,
                "result_backend": result_backend,
            },
            data=parse_data(data or ()),
            flag_names=QUESTION_FLAGS,
        )
        answers = collect_answers(
            questionnaire,
            given,
            env=make_environment(questionnaire.envops),
            use_defaults=defaults,
            ask=ask,
            flag_names=QUESTION_FLAGS,
            fallback_defaults={"project_name": target.name},
            base_context={"_folder_name": target.name},
        )

        if shipped is not None:
            provenance = shipped()
        files = render_project(source, target, answers, pretend=pretend)
        if pretend:
            typer.echo(f"Pretend run: nothing was written to {path}.")
            return
        if provenance is not None:
            record_provenance(target, provenance)
    _report(files, shown_path=path, package=str(answers.get("package_name", "")))


Result = TypeVar("Result")


def in_background(function: Callable[..., Result], *args: Any) -> Callable[[], Result]:
    """Start `function(*args)` on a thread; the callable returned waits for its result.

    It returns what `function` returned, or raises what it raised, each time it is called.
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((function(*args), None))
        except BaseException as error:
            outcome.append((None, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result() -> Result:
        thread.join()
        value, error = outcome[0]
        if error is not None:
            raise error
        return value

    return result


def chosen_template(
    template: str | None, vcs_ref: str | None, scratch: Path
) -> tuple[TemplateSource, Provenance | None]:
    """A template given by --template/--vcs-ref, checked out into `scratch`.

    Without --template, the version is one of the installed template's history.
    Without --vcs-ref, it is the newest release (the newest commit if there is
    none). Returns what to render and what the project records: the address as
    given (a local path made absolute) and the version's name. A local
    directory that git does not track is rendered as it is and records its path.
    """
    if template is None:
        src_path = template_url()
    else:
        local = Path(template).expanduser()
        src_path = str(local.resolve()) if local.is_dir() else template
        if local.is_dir() and not (local / ".git").exists():
            return TemplateSource(path=local.resolve(), vcs_ref=vcs_ref), None
    history = open_history(template, scratch / "template")
    version = chosen_version(history, vcs_ref, installed=template is None)
    checkout = history.check_out(version.commit)
    return TemplateSource(path=checkout, vcs_ref=version.commit), Provenance(src_path, version.name)


def _ask_on_terminal(question: Question, default: Any, validate: Any) -> Any:
    from workergen.prompts import ask_question

    return ask_question(question, default, validate, flag=flag_for(question, QUESTION_FLAGS))


def _report(files: Sequence[RenderedFile], *, shown_path: Path, package: str) -> None:
    for file in files:
        typer.echo(f"  {typer.style(file.action, fg='green')} {file.path}")
    typer.echo(f"\nCreated {len(files)} files in {shown_path}.\n")
    typer.echo("Next steps:")
    for command in next_commands(shown_path, package):
        typer.echo(f"  {command}")


def next_commands(path: Path, package: str) -> list[str]:
    """The commands that take a fresh project to a running worker."""
    commands = []
    if path.expanduser().resolve() != Path.cwd():
        commands.append(f"cd {shlex.quote(str(path))}")
    # The project's dependencies (the worker runtime, Celery, ...) go into an environment of
    # its own: without them the first command below fails on `import workergen_runtime`.
    commands += [
        "python -m venv .venv && . .venv/bin/activate",
        install_command(),
        "cp .env.example .env",
        f"python -m {package} queue work                # in one terminal",
        f"python -m {package} queue dispatch hello      # in another",
    ]
    return commands
