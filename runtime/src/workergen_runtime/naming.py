"""Naming rules for generated jobs and crons: one function turns what a user types into names.

Standard library only: the scaffolding (`make:job`) imports it, which runs without Celery.
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


# --- Rules for the template's answers and the settings that carry them ---------------
#
# One home for each rule: copier.yml's validators are generated from these rules
# (scripts/sync_validators.py), `workergen new` applies them through copier.yml, and
# the project's settings apply them to QUEUE_NAMESPACE and SQS_REGION at run time.
# Every pattern must match the WHOLE value (no trailing newline slips through).


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The public top-level modules of the standard library, Python 3.11 to 3.14; a
# package of the same name would shadow the module for the whole project.
STANDARD_LIBRARY = _words(
    """
    abc aifc annotationlib antigravity argparse array ast asynchat asyncio asyncore atexit
    audioop base64 bdb binascii bisect builtins bz2 calendar cgi cgitb chunk cmath cmd code
    codecs codeop collections colorsys compileall compression concurrent configparser
    contextlib contextvars copy copyreg crypt csv ctypes curses dataclasses datetime dbm
    decimal difflib dis distutils doctest email encodings ensurepip enum errno faulthandler
    fcntl filecmp fileinput fnmatch fractions ftplib functools gc genericpath getopt getpass
    gettext glob graphlib grp gzip hashlib heapq hmac html http idlelib imaplib imghdr imp
    importlib inspect io ipaddress itertools json keyword lib2to3 linecache locale logging
    lzma mailbox mailcap marshal math mimetypes mmap modulefinder msilib msvcrt
    multiprocessing netrc nis nntplib nt ntpath nturl2path numbers opcode operator optparse
    os ossaudiodev pathlib pdb pickle pickletools pipes pkgutil platform plistlib poplib
    posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat
    queue quopri random re readline reprlib resource rlcompleter runpy sched secrets select
    selectors shelve shlex shutil signal site smtpd smtplib sndhdr socket socketserver spwd
    sqlite3 sre_compile sre_constants sre_parse ssl stat statistics string stringprep struct
    subprocess sunau symtable sys sysconfig syslog tabnanny tarfile telnetlib tempfile
    termios textwrap this threading time timeit tkinter token tokenize tomllib trace
    traceback tracemalloc tty turtle turtledemo types typing unicodedata unittest urllib uu
    uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xdrlib xml xmlrpc
    zipapp zipfile zipimport zlib zoneinfo
    """
)
# The top-level packages of the project's dependencies (run time and dev, and the
# runtime's Django extras), and the names the project and its tooling import besides
# its own package.
DEPENDENCY_PACKAGES = _words(
    """
    asgiref cron_descriptor cronlog crontab crontabs django django_celery_beat
    django_celery_results django_stubs_ext django_tasks pytest_django sqlparse timezone_field
    amqp annotated_doc annotated_types anyio billiard boto3 botocore celery click click_didyoumean
    click_plugins click_repl curl dateutil dotenv fastapi flower gevent greenlet h11 humanize idna
    iniconfig jmespath kombu markdown_it opentelemetry prometheus_client pytz starlette tornado
    uvicorn zope workergen_runtime
    mdurl packaging pluggy prompt_toolkit py pycurl pydantic pydantic_core pydantic_settings
    pygments pytest redis rich ruff s3transfer shellingham six typer typing_extensions
    typing_inspection tzdata tzlocal urllib3 vine wcwidth yaml
    core crons jobs stubs test tests workergen
    """
)
PYTHON_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
# Names a lane cannot take: its queue would be a key the broker transport or the
# project keeps under the same namespace (Redis: the unacknowledged messages and
# the workers holding them; Celery's control and event exchanges; dead letters and
# delivery counts).
RESERVED_LANES = frozenset(
    {
        "celery",
        "celeryev",
        "deliveries",
        "dlq",
        "holders",
        "pidbox",
        "unacked",
        "unacked_index",
        "unacked_mutex",
    }
)
DEFAULT_LANE = "default"
TEMPLATE_SYNTAX = ("{{", "{%", "{#")
_NO_TEMPLATE_SYNTAX = r"(?s:(?!.*(?:\{\{|\{%|\{#)).*)"


@dataclass(frozen=True)
class Check:
    """One condition of a rule: the value fully matches `pattern` and is not in `refused`.

    `message` may name the value as `{value}`.
    """

    message: str
    pattern: str | None = None
    refused: frozenset[str] = frozenset()

    def fails(self, value: str) -> bool:
        """Whether `value` breaks this condition."""
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            return True
        return value in self.refused

    def describe(self, value: str) -> str:
        """The message, with the value filled in."""
        return self.message.replace("{value}", value)


@dataclass(frozen=True)
class TextRule:
    """The rule for one text answer or setting: its conditions, checked in order."""

    question: str
    checks: tuple[Check, ...]
    # The empty value is allowed and skips every check after the template-syntax one.
    empty_allowed: bool = False

    def problem(self, value: str) -> str | None:
        """Why `value` breaks the rule, or None when it follows it."""
        for index, check in enumerate(self.checks):
            if index == 1 and self.empty_allowed and value == "":
                return None
            if check.fails(value):
                return check.describe(value)
        return None


@dataclass(frozen=True)
class ListRule:
    """The rule for a comma-separated answer: every item follows `item`, once; `required` is one."""

    question: str
    item: TextRule
    item_message: str
    required: str
    required_message: str
    duplicate_message: str
    template_check: Check

    def items(self, value: str) -> list[str]:
        """The items of the answer, stripped of surrounding whitespace."""
        return [part.strip() for part in value.split(",")]

    def problem(self, value: str) -> str | None:
        """Why `value` breaks the rule, or None when it follows it."""
        if self.template_check.fails(value):
            return self.template_check.describe(value)
        names = self.items(value)
        bad = [name for name in names if self.item.problem(name) is not None]
        if bad:
            return self.item_message.replace("{value}", bad[0])
        if len(set(names)) != len(names):
            return self.duplicate_message
        if self.required not in names:
            return self.required_message
        return None


def _template_check(subject: str) -> Check:
    return Check(
        f"{subject} must not contain template syntax ('{{{{', '{{%' or '{{#')",
        pattern=_NO_TEMPLATE_SYNTAX,
    )


PROJECT_NAME_RULE = TextRule(
    "project_name",
    (
        _template_check("the project name"),
        Check("the project name is required", pattern=r"(?s:.*\S.*)"),
        Check(
            "the project name must start with a letter and hold only letters, digits, "
            "spaces, '-' and '_'",
            pattern=r"[A-Za-z][A-Za-z0-9 _-]*",
        ),
    ),
)
PACKAGE_NAME_RULE = TextRule(
    "package_name",
    (
        _template_check("the package name"),
        Check(
            "the package name must be a lowercase Python identifier: start with a letter, "
            "then letters, digits or '_', and end with a letter or digit "
            "(no spaces, no '-', no '/')",
            pattern=r"[a-z](?:[a-z0-9_]*[a-z0-9])?",
        ),
        Check(
            "'{value}' is a Python keyword; choose another package name",
            refused=PYTHON_KEYWORDS,
        ),
        Check(
            "'{value}' would shadow the module of that name, which the project or its "
            "dependencies import (standard library, a dependency, or a name of the project's "
            "layout: core, jobs, crons, stubs, tests); choose another package name, "
            "e.g. '{value}_app'",
            refused=STANDARD_LIBRARY | DEPENDENCY_PACKAGES,
        ),
    ),
)
DESCRIPTION_RULE = TextRule(
    "description",
    (
        _template_check("the description"),
        Check(
            "the description must be a single line without control characters",
            pattern=r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]*",
        ),
    ),
)
NAMESPACE_RULE = TextRule(
    "queue_namespace",
    (
        _template_check("the queue namespace"),
        Check(
            "the queue namespace must be empty or start with a lowercase letter and hold only "
            "lowercase letters, digits, '_' and '-'",
            pattern=r"[a-z][a-z0-9_-]*",
        ),
    ),
    empty_allowed=True,
)
LANE_NAME_RULE = TextRule(
    "lane",
    (
        _template_check("the lane"),
        Check(
            "a lane starts with a lowercase letter, holds only lowercase letters, digits, '_' "
            "and '-', and does not end in '-dlq'",
            pattern=r"(?!.*-dlq\Z)[a-z][a-z0-9_-]*",
        ),
        Check(
            "'{value}' is reserved for the broker's and the project's own keys and queues ("
            + ", ".join(sorted(RESERVED_LANES))
            + ")",
            refused=RESERVED_LANES,
        ),
    ),
)
LANES_RULE = ListRule(
    "lanes",
    item=LANE_NAME_RULE,
    item_message=(
        "invalid lane '{value}': a lane starts with a lowercase letter, holds only lowercase "
        "letters, digits, '_' and '-', does not end in '-dlq', and is none of "
        + ", ".join(sorted(RESERVED_LANES))
        + " (the broker's and the project's own keys and queues)"
    ),
    required=DEFAULT_LANE,
    required_message=("the lanes must include 'default', where jobs go when they name no lane"),
    duplicate_message="each lane may appear only once",
    template_check=_template_check("the lanes"),
)
SQS_REGION_RULE = TextRule(
    "sqs_region",
    (
        _template_check("the SQS region"),
        Check(
            "the SQS region must look like us-east-1 or eu-west-3",
            pattern=r"[a-z]{2}(?:-[a-z]+)+-[0-9]+",
        ),
    ),
)
# The rule of each copier.yml question that has one, by question name.
ANSWER_RULES: dict[str, TextRule | ListRule] = {
    rule.question: rule
    for rule in (
        PROJECT_NAME_RULE,
        PACKAGE_NAME_RULE,
        DESCRIPTION_RULE,
        NAMESPACE_RULE,
        LANES_RULE,
        SQS_REGION_RULE,
    )
}


def lane_problem(name: str) -> str | None:
    """Why `name` cannot be a lane, or None when it can."""
    return LANE_NAME_RULE.problem(name)


def namespace_problem(namespace: str) -> str | None:
    """Why `namespace` cannot be QUEUE_NAMESPACE, or None when it can."""
    return NAMESPACE_RULE.problem(namespace)
