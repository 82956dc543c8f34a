"""Answers to the template's questions: casting, defaults, validation, collection.

Everything here is plain logic over a `Questionnaire`; the only side effect is
the `ask` callback that `collect_answers` receives, which the CLI points at a
terminal prompt when there is one. Defaults and validators are Jinja templates
from copier.yml, rendered the way copier renders them: a sandboxed Jinja
environment with the Ansible core filters (`regex_search`, ...) and the
template's `_envops`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from workergen.errors import (
    ConflictingAnswerError,
    InvalidAnswerError,
    MalformedDataError,
    MissingAnswersError,
    UnaskedAnswerError,
    UnknownDataKeyError,
)
from workergen.questions import Question, Questionnaire

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment

# Validate an answer: None when it is fine, else the reason it is not.
Validate = Callable[[Any], "str | None"]
# Ask one question: (question, default or MISSING, validate) -> answer.
Ask = Callable[[Question, Any, Validate], Any]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Marks a question that has no default."""

_TRUE = {"y", "yes", "t", "true", "on", "1"}
_FALSE = {"n", "no", "f", "false", "off", "0", ""}


def make_environment(envops: Mapping[str, Any] | None = None) -> SandboxedEnvironment:
    """The Jinja environment copier renders copier.yml with."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment
    from jinja2_ansible_filters import AnsibleCoreFiltersExtension

    from workergen.jinja_cache import reuse_compiled

    options = dict(envops or {})
    undefined = options.get("undefined")
    if isinstance(undefined, str):
        options["undefined"] = {
            "jinja2.Undefined": jinja2.Undefined,
            "jinja2.StrictUndefined": jinja2.StrictUndefined,
        }[undefined]
    return reuse_compiled(SandboxedEnvironment(extensions=[AnsibleCoreFiltersExtension], **options))


def cast_answer(question: Question, value: Any) -> Any:
    """Turn a raw answer (text from a flag or a prompt) into the question's type.

    Raises ValueError with a message for the user when it cannot.
    """
    kind = question.type
    if kind == "str":
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, bool | int | float):
            return str(value)
        raise ValueError(f"expected text, got {type(value).__name__}")
    if not isinstance(value, str):
        return value
    if kind == "bool":
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError("expected yes or no")
    if kind == "int":
        try:
            return int(value.strip())
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "float":
        try:
            return float(value.strip())
        except ValueError:
            raise ValueError("expected a number") from None
    if kind == "json":
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"expected JSON: {error}") from None
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise ValueError(f"expected YAML: {error}") from None


def is_enabled(question: Question, context: Mapping[str, Any], env: SandboxedEnvironment) -> bool:
    """Whether copier would ask or compute the question, given the answers so far."""
    if isinstance(question.when, bool):
        return question.when
    rendered = env.from_string(question.when).render(context).strip().lower()
    return rendered not in {"", "n", "no", "f", "false", "off", "0", "~", "null", "none"}


def render_default(
    question: Question, context: Mapping[str, Any], env: SandboxedEnvironment
) -> Any:
    """The question's default, rendered against the answers so far; MISSING if none."""
    if not question.has_default:
        return MISSING
    default = question.default
    if isinstance(default, str):
        default = env.from_string(default).render(context)
    return cast_answer(question, default)


def answer_problem(
    question: Question, value: Any, context: Mapping[str, Any], env: SandboxedEnvironment
) -> str | None:
    """Why `value` is not a valid answer to `question`, or None when it is.

    Checks the choices, then renders copier.yml's validator, which prints an
    error message or nothing.
    """
    if question.choices and value not in [choice.value for choice in question.choices]:
        allowed = ", ".join(str(choice.value) for choice in question.choices)
        return f"must be one of: {allowed}"
    if not question.validator:
        return None
    try:
        message = env.from_string(question.validator).render({**context, question.name: value})
    except Exception as error:  # a validator that crashes on a value rejects it, as in copier
        return str(error) or type(error).__name__
    return message.strip() or None


def parse_data(items: Iterable[str]) -> dict[str, str]:
    """Split `--data KEY=VALUE` items into a mapping (later items win)."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise MalformedDataError(item=item)
        result[key] = value
    return result


def merge_given(
    questionnaire: Questionnaire,
    *,
    flags: Mapping[str, Any],
    data: Mapping[str, str],
    flag_names: Mapping[str, str],
) -> dict[str, Any]:
    """Combine answers from dedicated flags and `--data`, refusing unknown or clashing keys.

    `flags` maps question names to the flag's value (None when not given).
    """
    known = [question.name for question in questionnaire.asked]
    given: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise UnknownDataKeyError(key=key, known=known)
        given[key] = value
    for name, value in flags.items():
        if value is None:
            continue
        if name in given and given[name] != value:
            raise ConflictingAnswerError(
                question=name,
                flag=flag_names.get(name, name),
                flag_value=value,
                data_value=given[name],
            )
        given[name] = value
    return given


def flag_for(question: Question, flag_names: Mapping[str, str]) -> str:
    """The option that answers `question` on the command line."""
    return flag_names.get(question.name) or f"--data {question.name}=VALUE"


def collect_answers(
    questionnaire: Questionnaire,
    given: Mapping[str, Any],
    *,
    env: SandboxedEnvironment,
    use_defaults: bool,
    ask: Ask | None,
    flag_names: Mapping[str, str] | None = None,
    fallback_defaults: Mapping[str, Any] | None = None,
    base_context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Answer every question, in copier.yml's order, and validate every answer.

    Given answers are cast and validated; the others take their default when
    `use_defaults` is set, are asked through `ask` otherwise, and make the call
    fail at once (naming the flags to pass) when there is nobody to ask.
    `fallback_defaults` supplies defaults copier.yml cannot know (the project
    name from the target directory). Computed questions are left to copier;
    they only enter the context later defaults render with.
    """
    flag_names = flag_names or {}
    fallback_defaults = fallback_defaults or {}
    if ask is None and not use_defaults:
        missing = missing_questions(questionnaire, given)
        if missing:
            raise MissingAnswersError(
                flags=[flag_for(question, flag_names) for question in missing],
                can_default=all(
                    question.has_default or question.name in fallback_defaults
                    for question in missing
                ),
            )

    answers: dict[str, Any] = {}
    context: dict[str, Any] = dict(base_context or {})
    for question in questionnaire.questions:
        if not is_enabled(question, context, env):
            if question.name in given:
                # Copier would drop the answer without a word; the user meant something by it.
                raise UnaskedAnswerError(
                    question=question.name,
                    flag=flag_for(question, flag_names),
                    condition=condition_text(question.when),
                )
            if question.computed:
                _add_computed(question, context, env)
            continue
        flag = flag_for(question, flag_names)

        def validate(value: Any, question: Question = question) -> str | None:
            return answer_problem(question, value, context, env)

        default = render_default(question, context, env)
        origin = ""
        if default is MISSING and question.name in fallback_defaults:
            default = cast_answer(question, fallback_defaults[question.name])
            origin = "the default"

        if question.name in given:
            value = _cast_or_reject(question, given[question.name], flag)
            origin = ""
        elif use_defaults or ask is None:
            if default is MISSING or not use_defaults:
                # Only conditional questions get here unanswered without --defaults.
                raise MissingAnswersError(flags=[flag], can_default=default is not MISSING)
            value = default
            origin = origin or "the default"
        else:
            value = ask(question, default, validate)
            origin = ""

        problem = validate(value)
        if problem:
            raise InvalidAnswerError(
                question=question.name, value=value, reason=problem, flag=flag, origin=origin
            )
        answers[question.name] = value
        context[question.name] = value
    return answers


def condition_text(when: bool | str) -> str:
    """A question's `when` as a person reads it: `{{ broker == 'sqs' }}` gives `broker == 'sqs'`."""
    if isinstance(when, bool):
        return "never" if not when else "always"
    text = when.strip()
    if text.startswith("{{") and text.endswith("}}"):
        text = text[2:-2].strip()
    return text


def _cast_or_reject(question: Question, raw: Any, flag: str) -> Any:
    try:
        return cast_answer(question, raw)
    except ValueError as error:
        raise InvalidAnswerError(
            question=question.name, value=raw, reason=str(error), flag=flag
        ) from None


def _add_computed(question: Question, context: dict[str, Any], env: SandboxedEnvironment) -> None:
    # Copier computes these itself when rendering; workergen only needs them
    # when a later default refers to one, so a value that fails to render is
    # left out rather than reported.
    try:
        value = render_default(question, context, env)
    except Exception:
        return
    if value is not MISSING:
        context[question.name] = value


def missing_questions(questionnaire: Questionnaire, given: Iterable[str]) -> list[Question]:
    """The askable questions that `given` does not answer.

    A question asked only under a condition (`when` is a template, e.g. the
    RabbitMQ queue type) is checked when the answers before it are known.
    """
    given = set(given)
    return [
        question
        for question in questionnaire.asked
        if question.name not in given and question.when is True
    ]
