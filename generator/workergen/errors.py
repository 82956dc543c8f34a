"""Every error workergen raises on purpose.

`UserMessageError` and its subclasses are expected: the CLI prints their
message in red and exits 1, without a traceback. Anything else is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path


class WorkergenError(Exception):
    """Root of workergen's errors."""


class UserMessageError(WorkergenError):
    """An error whose message is meant for the user, shown without a traceback."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n{hint}")


class TemplateNotFoundError(UserMessageError):
    """The template shipped with workergen cannot be found."""

    def __init__(self, *, searched: Sequence[Path]) -> None:
        places = ", ".join(str(path) for path in searched)
        super().__init__(
            f"the workergen template was not found (looked for copier.yml in {places})",
            hint="Reinstall workergen; the wheel ships the template as workergen/_template.",
        )


class QuestionsFileError(UserMessageError):
    """copier.yml cannot be read as a list of questions."""

    def __init__(self, *, path: Path, reason: str) -> None:
        super().__init__(f"cannot read the questions in {path}: {reason}")


class InvalidAnswerError(UserMessageError):
    """An answer breaks the question's validator, type or choices."""

    def __init__(
        self, *, question: str, value: object, reason: str, flag: str | None, origin: str = ""
    ) -> None:
        self.question = question
        self.value = value
        self.reason = reason
        hint = f"Pass a valid value with {flag}." if flag else None
        shown = f"{value!r} ({origin})" if origin else repr(value)
        super().__init__(f"invalid {question} {shown}: {reason}", hint=hint)


class UnknownDataKeyError(UserMessageError):
    """`--data` names a question copier.yml does not ask."""

    def __init__(self, *, key: str, known: Iterable[str]) -> None:
        super().__init__(
            f"unknown question {key!r} in --data",
            hint=f"Known questions: {', '.join(known)}.",
        )


class UnaskedAnswerError(UserMessageError):
    """An answer to a question that the other answers leave unasked (its `when` is false)."""

    def __init__(self, *, question: str, flag: str, condition: str) -> None:
        self.question = question
        super().__init__(
            f"{question} is not asked for these answers: copier.yml asks it only when {condition}",
            hint=f"Drop {flag.split('=')[0]}, or change the answers it depends on.",
        )


class MalformedDataError(UserMessageError):
    """`--data` is not of the form KEY=VALUE."""

    def __init__(self, *, item: str) -> None:
        super().__init__(
            f"--data {item!r} is not of the form KEY=VALUE",
            hint="For example: --data lanes=default,batch",
        )


class ConflictingAnswerError(UserMessageError):
    """The same question was answered twice with different values."""

    def __init__(self, *, question: str, flag: str, flag_value: object, data_value: object) -> None:
        super().__init__(
            f"{question} is given twice: {flag} {flag_value!r} and "
            f"--data {question}={data_value!r}",
            hint="Pass it once.",
        )


class MissingAnswersError(UserMessageError):
    """Answers are missing and there is no terminal to ask them on."""

    def __init__(self, *, flags: Sequence[str], can_default: bool) -> None:
        self.flags = tuple(flags)
        hint = f"Pass {', '.join(flags)}"
        hint += ", or --defaults to accept the defaults." if can_default else "."
        super().__init__("answers are missing and there is no terminal to ask them on", hint=hint)


class InteractiveSessionError(UserMessageError):
    """The terminal closed while a question was being asked."""

    def __init__(self, *, question: str, flag: str | None) -> None:
        hint = f"Pass {flag} to answer it without a prompt." if flag else None
        super().__init__(f"the input ended while asking for {question}", hint=hint)


class TargetNotEmptyError(UserMessageError):
    """The target directory already holds files."""

    def __init__(self, *, path: Path) -> None:
        super().__init__(
            f"{path} already exists and is not empty",
            hint="Choose another path, or pass --force to write over the files there.",
        )


class TargetNotADirectoryError(UserMessageError):
    """The target path exists and is not a directory."""

    def __init__(self, *, path: Path) -> None:
        super().__init__(f"{path} exists and is not a directory")


class TargetUnderAFileError(UserMessageError):
    """A part of the target's path is a file, so the target cannot be created."""

    def __init__(self, *, path: Path, file: Path) -> None:
        super().__init__(
            f"cannot create {path}: {file} is a file, not a directory",
            hint="Choose a path whose folders are directories (or do not exist yet).",
        )


class TargetNotWritableError(UserMessageError):
    """This user may not create files where the project would go."""

    def __init__(self, *, path: Path, directory: Path) -> None:
        super().__init__(
            f"cannot create {path}: {directory} is not writable by this user",
            hint="Choose a path you may write to, or change the directory's permissions.",
        )


class TargetNotCreatedError(UserMessageError):
    """The target's directory (or its parents) could not be created."""

    def __init__(self, *, path: Path, reason: str) -> None:
        super().__init__(
            f"cannot create {path}: {reason}",
            hint="Choose another path; nothing was written.",
        )


class RenderError(UserMessageError):
    """Copier failed while rendering; nothing was left on disk."""

    def __init__(self, *, target: Path, reason: str) -> None:
        super().__init__(
            f"rendering {target} failed: {reason}",
            hint="Nothing was written.",
        )


# --- updating a generated project --------------------------------------------


class AnswersFileError(UserMessageError):
    """The project's .copier-answers.yml cannot be read."""

    def __init__(self, *, path: Path, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")


class NotAProjectError(UserMessageError):
    """The command was run outside a project generated by workergen."""

    def __init__(self, *, start: Path, answers_file: str) -> None:
        super().__init__(
            f"{start} is not inside a project generated by workergen "
            f"(no {answers_file} here or above)",
            hint="Run this command from a project made by `workergen new`, or cd into one.",
        )


class NotAGitRepositoryError(UserMessageError):
    """Updates need git: they merge and must be reviewable."""

    def __init__(self, *, project: Path) -> None:
        super().__init__(
            f"{project} is not tracked by git; updates merge template changes into "
            "your files and need a commit to compare with",
            hint="Run: git init && git add -A && git commit -m 'Generated project'",
        )


class DirtyProjectError(UserMessageError):
    """The project has uncommitted changes, which an update would mix with its own."""

    def __init__(self, *, project: Path, files: Sequence[str]) -> None:
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        super().__init__(
            f"{project} has uncommitted changes, which an update would mix with its own: {shown}",
            hint="Commit or stash them, then run the update again.",
        )


class NoTemplateVersionError(UserMessageError):
    """The answers file records no template address or version."""

    def __init__(self, *, path: Path, missing: str) -> None:
        super().__init__(
            f"{path} records no {missing}, so the template version is unknown",
            hint="Record the template's address as _src_path and its version (a release "
            "such as v0.1.0, or a commit) as _commit (see docs/updating.md).",
        )


class TemplateRepositoryError(UserMessageError):
    """The template's history cannot be read with git."""

    def __init__(self, *, source: str, reason: str) -> None:
        super().__init__(
            f"cannot read the template history in {source}: {reason}",
            hint="Reinstall workergen (a wheel ships the history, a checkout is its own), "
            "or pass --template with a clone of the template repository.",
        )


class UnknownTemplateVersionError(UserMessageError):
    """The project records a template version the template's history does not hold."""

    def __init__(self, *, ref: str, source: str, latest: str | None, recorded: bool) -> None:
        newest = f"its newest release is {latest}" if latest else "it records no release"
        hint = (
            "Install the workergen that made the project or a newer one, or pass "
            "--template with a clone of the template repository (see docs/updating.md)."
            if recorded
            else "Pass a release it lists (see RELEASES) or one of its commits."
        )
        super().__init__(f"the template version {ref!r} is not in {source} ({newest})", hint=hint)


class NoReleaseError(UserMessageError):
    """The template's history lists no release to compare with."""

    def __init__(self, *, source: str) -> None:
        super().__init__(
            f"{source} lists no template release (no RELEASES file at its HEAD), "
            "so there is nothing to compare the project with",
            hint="Pass --template with a clone of the template repository, whose RELEASES "
            "file names the releases.",
        )


class UpdateFailedError(UserMessageError):
    """Copier stopped while updating or rendering a project."""

    def __init__(self, *, project: Path, reason: str) -> None:
        super().__init__(
            f"updating {project} failed: {_first_line(reason)}",
            hint="The project was not changed.",
        )


class VersionRenderError(UserMessageError):
    """The template version a project records cannot be rendered with its answers."""

    def __init__(self, *, version: str, reason: str) -> None:
        super().__init__(
            f"cannot render template version {version} with the project's answers: "
            f"{_first_line(reason)}",
            hint="Check the answers in .copier-answers.yml; nothing was changed.",
        )


def _first_line(text: str) -> str:
    """The first non-empty line of a message from git or copier, which may hold many."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
