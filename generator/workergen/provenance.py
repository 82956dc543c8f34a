"""Where a generated project's template came from, as recorded in its answers file.

Copier reads `_src_path` and `_commit` from `.copier-answers.yml` to update a
project. `workergen new` renders from the template shipped inside the
installed package (offline), so copier would record a path that exists only on
this machine. Instead the project records the template repository's public
address and the name of the template version it was rendered from
(`v0.2.0-0-g<commit>`, see `workergen.releases`): a commit every clone of the
repository holds, and that the history shipped in every later wheel holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workergen.errors import AnswersFileError
from workergen.template_source import TemplateSource

ANSWERS_FILE = ".copier-answers.yml"
ADDED_ANSWERS_FILE = ".copier-answers.workergen.yml"
"""The answers file of workers added to an existing project (`workergen add`)."""
TEMPLATE_URL_ENV = "WORKERGEN_TEMPLATE_URL"
DEFAULT_TEMPLATE_URL = "https://github.com/workergen/workergen.git"
"""The template repository's public address."""

_ANSWERS_HEADER = "# Changes here will be overwritten by Copier; NEVER EDIT MANUALLY\n"


@dataclass(frozen=True)
class Provenance:
    """A template's address (`_src_path`) and version (`_commit`, a commit of its history)."""

    src_path: str
    commit: str | None


def template_url() -> str:
    """The template repository's address: $WORKERGEN_TEMPLATE_URL, else the public one."""
    return os.environ.get(TEMPLATE_URL_ENV, "").strip() or DEFAULT_TEMPLATE_URL


def shipped_provenance(source: TemplateSource) -> Provenance:
    """What a project rendered from the shipped template `source` records."""
    return Provenance(src_path=template_url(), commit=source.describe())


def read_answers(project: Path, name: str = ANSWERS_FILE) -> dict[str, Any]:
    """The recorded answers in the answers file `name`, `_src_path` and `_commit` included."""
    import yaml

    path = project / name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise AnswersFileError(path=path, reason=str(error)) from None
    if not isinstance(data, dict):
        raise AnswersFileError(path=path, reason="it is not a mapping")
    return data


def record_provenance(project: Path, provenance: Provenance, name: str = ANSWERS_FILE) -> None:
    """Rewrite the answers file `name` so it names `provenance` as the template it came from.

    A provenance without `commit` keeps the version copier recorded.
    """
    answers = read_answers(project, name)
    answers["_src_path"] = provenance.src_path
    if provenance.commit is not None:
        answers["_commit"] = provenance.commit
    write_answers(project, answers, name)


def write_answers(project: Path, answers: Mapping[str, Any], name: str = ANSWERS_FILE) -> None:
    """Write the answers file exactly as copier writes it, so updates show no churn."""
    import yaml

    # The same dump as copier's `to_nice_yaml` filter in the template's answers file.
    body = yaml.dump(dict(answers), indent=4, allow_unicode=True, default_flow_style=False)
    (project / name).write_text(_ANSWERS_HEADER + body, encoding="utf-8")
