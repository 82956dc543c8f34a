"""The terminal front end: one questionary prompt per copier.yml question.

The prompt kind follows the question: a list to pick from when it has
choices, yes/no for `bool`, free text otherwise. The default shown is the
one rendered from the earlier answers, and every answer is checked with the
question's own validator before the prompt lets it through.
"""

from __future__ import annotations

from typing import Any

from workergen.answers import MISSING, Validate, cast_answer
from workergen.errors import InteractiveSessionError
from workergen.questions import Question


def ask_question(
    question: Question, default: Any, validate: Validate, *, flag: str | None = None
) -> Any:
    """Ask `question` on the terminal and return the validated, typed answer.

    `flag` names the option that answers the question without a prompt; the
    error raised when the input ends mentions it.
    """
    import questionary

    message = question.help or question.name
    if question.choices:
        choices = [
            questionary.Choice(title=choice.title, value=choice.value)
            for choice in question.choices
        ]
        selected = next((c for c in choices if default is not MISSING and c.value == default), None)
        prompt = questionary.select(message, choices=choices, default=selected)
    elif question.type == "bool":
        prompt = questionary.confirm(
            message, default=bool(default) if default is not MISSING else False
        )
    else:

        def check(text: str) -> bool | str:
            try:
                value = cast_answer(question, text)
            except ValueError as error:
                return str(error)
            return validate(value) or True

        shown = "" if default is MISSING or default is None else str(default)
        prompt = questionary.text(message, default=shown, validate=check)
    try:
        answer = prompt.unsafe_ask()
    except EOFError:
        raise InteractiveSessionError(question=question.name, flag=flag) from None
    return cast_answer(question, answer)
