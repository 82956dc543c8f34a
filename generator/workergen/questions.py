"""The questions of `workergen new`, read from the template's copier.yml.

copier.yml is the single source of the questions: their order, type, help,
default, choices and validator. This module only reads it; rendering defaults
and validating answers lives in `workergen.answers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workergen.errors import QuestionsFileError

# The types copier accepts for a question (copier's CAST_STR_TO_NATIVE).
QUESTION_TYPES = frozenset({"str", "int", "float", "bool", "json", "yaml"})


@dataclass(frozen=True)
class Choice:
    """One option of a choice question: what the prompt shows and the answer it gives."""

    title: str
    value: Any


@dataclass(frozen=True)
class Question:
    """A question of copier.yml, as workergen needs it.

    `default` and `validator` are Jinja source, rendered later against the
    answers given so far. `when` is a bool or Jinja source; `when: false`
    makes the question computed: its default is its value and it is never
    asked.
    """

    name: str
    type: str = "str"
    help: str = ""
    default: Any = None
    has_default: bool = False
    choices: tuple[Choice, ...] = ()
    validator: str = ""
    when: bool | str = True
    placeholder: str = ""

    @property
    def computed(self) -> bool:
        """True when copier.yml says `when: false`: a derived value, never asked."""
        return self.when is False


@dataclass(frozen=True)
class Questionnaire:
    """The questions of a template, in order, with the Jinja options they render with."""

    questions: tuple[Question, ...]
    envops: Mapping[str, Any] = field(default_factory=dict)

    @property
    def asked(self) -> tuple[Question, ...]:
        """The questions a user may answer (every one that is not computed)."""
        return tuple(question for question in self.questions if not question.computed)

    def get(self, name: str) -> Question:
        """The question called `name`; KeyError if there is none."""
        for question in self.questions:
            if question.name == name:
                return question
        raise KeyError(name)


def load_questionnaire(copier_yml: Path) -> Questionnaire:
    """Read the questions and Jinja options of a copier.yml file."""
    # Imported here so that `workergen --help` does not pay for YAML.
    import yaml

    # The C loader, when PyYAML has it, reads copier.yml several times faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(copier_yml.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as error:
        raise QuestionsFileError(path=copier_yml, reason=str(error)) from None
    if not isinstance(raw, dict):
        raise QuestionsFileError(path=copier_yml, reason="the file is not a mapping")
    try:
        return parse_questionnaire(raw)
    except ValueError as error:
        raise QuestionsFileError(path=copier_yml, reason=str(error)) from None


def parse_questionnaire(config: Mapping[str, Any]) -> Questionnaire:
    """Build a Questionnaire from the parsed content of a copier.yml file."""
    envops = config.get("_envops") or {}
    if not isinstance(envops, Mapping):
        raise ValueError("_envops must be a mapping")
    questions = tuple(
        parse_question(name, spec) for name, spec in config.items() if not name.startswith("_")
    )
    return Questionnaire(questions=questions, envops=dict(envops))


def parse_question(name: str, spec: Any) -> Question:
    """Build one Question from its copier.yml entry (a mapping, or a bare default)."""
    if not isinstance(spec, Mapping):
        # Copier's short form: `name: default`.
        spec = {"default": spec}
    has_default = "default" in spec
    default = spec.get("default")
    type_name = spec.get("type") or _inferred_type(default, has_default=has_default)
    if type_name not in QUESTION_TYPES:
        raise ValueError(f"question {name!r} has unsupported type {type_name!r}")
    if spec.get("multiselect"):
        raise ValueError(f"question {name!r} is a multiselect, which workergen does not support")
    when = spec.get("when", True)
    if not isinstance(when, bool | str):
        raise ValueError(f"question {name!r} has a 'when' that is neither a bool nor a template")
    return Question(
        name=name,
        type=type_name,
        help=str(spec.get("help") or ""),
        default=default,
        has_default=has_default,
        choices=parse_choices(name, spec.get("choices")),
        validator=str(spec.get("validator") or ""),
        when=when,
        placeholder=str(spec.get("placeholder") or ""),
    )


def parse_choices(name: str, choices: Any) -> tuple[Choice, ...]:
    """Normalize copier's choice spellings (list, mapping title → value, pairs)."""
    if not choices:
        return ()
    if isinstance(choices, Mapping):
        items = list(choices.items())
    elif isinstance(choices, list):
        items = [tuple(item) if isinstance(item, list) else (item, item) for item in choices]
    else:
        raise ValueError(f"question {name!r} has choices that are not a list nor a mapping")
    result = []
    for item in items:
        if len(item) != 2:
            raise ValueError(f"question {name!r} has a choice that is not a (title, value) pair")
        title, value = item
        if isinstance(value, Mapping):
            # Copier's extended form: {value: ..., validator: ...}.
            if "value" not in value:
                raise ValueError(f"question {name!r} has a choice without 'value'")
            value = value["value"]
        result.append(Choice(title=str(title), value=value))
    return tuple(result)


def _inferred_type(default: Any, *, has_default: bool) -> str:
    # Copier infers the type from the default's Python type, else yaml.
    if has_default:
        inferred = type(default).__name__
        if inferred in QUESTION_TYPES:
            return inferred
    return "yaml"
