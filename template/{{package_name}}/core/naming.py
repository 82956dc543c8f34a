"""Naming rules for generated jobs and crons: one function turns what a user types into names.

Standard library only: `workergen make:job` loads this file straight from the project.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

# Names that would shadow the project's own packages or the libraries it runs on.
RESERVED_NAMES = frozenset(
    {"core", "jobs", "crons", "tests", "test", "celery", "kombu", "redis", "typer", "stubs"}
)
SUFFIXES = {"job": "Job", "cron": "Cron"}
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
_LANE = re.compile(r"[a-z][a-z0-9_-]*")
LANE_RULE = (
    "a lane starts with a lowercase letter, holds only lowercase letters, digits, '_' and '-', "
    "and is not 'dlq' nor ends in '-dlq' (reserved for dead letters)"
)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class InvalidNameError(ValueError):
    """A name cannot become a module and a class; the message says why and what to type."""


@dataclass(frozen=True)
class GeneratedName:
    """Every name derived from one user-typed name, for one kind (job or cron)."""

    kind: str
    segments: tuple[str, ...]

    @property
    def module(self) -> str:
        """The dotted module path below `jobs/` or `crons/`: `billing.refund`."""
        return ".".join(self.segments)

    @property
    def class_name(self) -> str:
        """`RefundJob` for `billing/refund`."""
        last = self.segments[-1]
        return "".join(part.capitalize() for part in last.split("_") if part) + SUFFIXES[self.kind]

    def task_name(self, package: str) -> str:
        """The task's wire name: `<pkg>.billing.refund` for jobs, `<pkg>.crons.<name>` for crons."""
        prefix = package if self.kind == "job" else f"{package}.crons"
        return f"{prefix}.{self.module}"

    def source_path(self, package: str) -> str:
        """`<pkg>/jobs/billing/refund.py`."""
        return "/".join((package, f"{self.kind}s", *self.segments[:-1], f"{self.segments[-1]}.py"))

    def test_path(self) -> str:
        """`tests/jobs/billing/test_refund.py`."""
        return "/".join(
            ("tests", f"{self.kind}s", *self.segments[:-1], f"test_{self.segments[-1]}.py")
        )

    def package_paths(self, package: str) -> list[str]:
        """The `__init__.py` of every sub-package the module nests in."""
        base = (package, f"{self.kind}s")
        return [
            "/".join((*base, *self.segments[: depth + 1], "__init__.py"))
            for depth in range(len(self.segments) - 1)
        ]


def is_valid_lane(name: str) -> bool:
    """Whether `name` may be a lane (see LANE_RULE); the whole string must match."""
    return bool(_LANE.fullmatch(name)) and name != "dlq" and not name.endswith("-dlq")


def snake_case(word: str) -> str:
    """`SendInvoice`, `send-invoice`, `send invoice` and `send_invoice` give `send_invoice`."""
    spaced = _CAMEL_BOUNDARY.sub("_", word.strip())
    return re.sub(r"[-\s_]+", "_", spaced).lower()


def normalize_name(raw: str, kind: str = "job") -> GeneratedName:
    """Turn `InvoiceJob`, `invoice-job`, `billing/refund` ... into a GeneratedName, or refuse."""
    if kind not in SUFFIXES:
        raise ValueError(f"unknown kind {kind!r}")
    text = raw.strip()
    if not text:
        raise InvalidNameError("the name is empty; give one such as SendInvoice or billing/refund")
    if text.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", text):
        raise InvalidNameError(
            f"{raw!r} is an absolute path; give a name relative to {kind}s/, e.g. billing/refund"
        )
    if "\\" in text:
        raise InvalidNameError(f"{raw!r} uses '\\'; separate nested names with '/'")
    parts = text.split("/")
    if any(part in (".", "..") for part in parts):
        raise InvalidNameError(
            f"{raw!r} leaves the {kind}s/ folder ('.' and '..' are not allowed); "
            "give a name such as billing/refund"
        )
    if any(not part.strip() for part in parts):
        raise InvalidNameError(
            f"{raw!r} has an empty segment; write nested names as billing/refund"
        )
    segments = [snake_case(part) for part in parts]
    suffix = f"_{kind}"
    if segments[-1].endswith(suffix) and segments[-1] != suffix.lstrip("_"):
        segments[-1] = segments[-1][: -len(suffix)]
    for original, segment in zip(parts, segments, strict=True):
        check_segment(original, segment)
    return GeneratedName(kind=kind, segments=tuple(segments))


def check_segment(original: str, segment: str) -> None:
    """Refuse a segment that is not a lowercase identifier, a keyword or a reserved name."""
    if not _IDENTIFIER.fullmatch(segment):
        raise InvalidNameError(
            f"{original!r} does not give a valid module name ({segment!r}): start with a letter, "
            "then use letters, digits, '_' or '-'"
        )
    if keyword.iskeyword(segment) or keyword.issoftkeyword(segment):
        raise InvalidNameError(f"{original!r} is a Python keyword; choose another name")
    if segment in RESERVED_NAMES or segment in SUFFIXES:
        raise InvalidNameError(
            f"{original!r} is reserved ({', '.join(sorted(RESERVED_NAMES | set(SUFFIXES)))}); "
            "choose another name"
        )
