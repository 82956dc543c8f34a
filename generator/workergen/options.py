"""Command-line options, declared once and reused by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.models import OptionInfo

# The flag that answers each copier.yml question. A question missing here is
# still answerable with `--data NAME=VALUE`.
QUESTION_FLAGS: dict[str, str] = {
    "project_name": "--name",
    "package_name": "--package",
    "description": "--description",
    "broker": "--broker",
    "queue_namespace": "--namespace",
    "lanes": "--lanes",
    "result_backend": "--result-backend",
}

_ANSWERS = "Answers (see docs/questions.md)"


def _question_option(question: str, help: str) -> OptionInfo:
    return typer.Option(
        QUESTION_FLAGS[question],
        help=f"{help} ({question})",
        show_default=False,
        rich_help_panel=_ANSWERS,
    )


TargetPath = Annotated[
    Path,
    typer.Argument(metavar="PATH", help="Directory to create the project in.", show_default=False),
]
ProjectName = Annotated[
    str | None, _question_option("project_name", "Project name; defaults to PATH's name.")
]
PackageName = Annotated[str | None, _question_option("package_name", "Python package name.")]
Description = Annotated[str | None, _question_option("description", "One-line description.")]
Broker = Annotated[str | None, _question_option("broker", "Message broker.")]
QueueNamespace = Annotated[
    str | None, _question_option("queue_namespace", "Prefix for every queue; '' for none.")
]
Lanes = Annotated[str | None, _question_option("lanes", "Comma-separated queue lanes.")]
ResultBackend = Annotated[str | None, _question_option("result_backend", "Result backend.")]
Data = Annotated[
    list[str] | None,
    typer.Option(
        "--data",
        "-d",
        metavar="KEY=VALUE",
        help="Answer any question by name; repeatable.",
        show_default=False,
        rich_help_panel=_ANSWERS,
    ),
]
Defaults = Annotated[
    bool,
    typer.Option(
        "--defaults",
        help="Accept the default of every question not answered by a flag; never prompt.",
        rich_help_panel=_ANSWERS,
    ),
]
Force = Annotated[
    bool,
    typer.Option("--force", "-f", help="Write into a target that is not empty."),
]
Pretend = Annotated[
    bool,
    typer.Option("--pretend", help="Show what would be written; write nothing."),
]
TemplateOption = Annotated[
    str | None,
    typer.Option(
        "--template",
        metavar="SOURCE",
        help="Render from this template (a git address such as gh:org/repo, or a path) "
        "instead of the one shipped with workergen.",
        show_default=False,
    ),
]
VcsRef = Annotated[
    str | None,
    typer.Option(
        "--vcs-ref",
        metavar="REF",
        help="Template version (a release such as v0.2.0, or a commit); default: the "
        "installed template, or the newest release of --template.",
        show_default=False,
    ),
]
HistoryOption = Annotated[
    str | None,
    typer.Option(
        "--template",
        metavar="SOURCE",
        help="Read the template and its releases from this repository (a path, a git "
        "address or a bundle) instead of the installed workergen.",
        show_default=False,
    ),
]
