"""The template compiled when a wheel is built, so that a first `workergen new` compiles nothing.

`workergen new` keeps the Jinja code it compiles in the user's cache directory
(`workergen.jinja_cache`); until a first render fills it, every templated file,
path and question is compiled. The wheel's build runs the same checks and
renders once per broker, with a cache of its own, and ships what they compiled
as `workergen/_template/compiled/`. A render reads an entry there when the
user's cache has none. Jinja checks each entry against the source, its own
version and Python's, and the directory is named after everything else that
shapes the code (`compiled_template_cache`): an install whose Python, Jinja or
copier differ from the build's compiles as before.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from workergen.answers import collect_answers, make_environment, merge_given, parse_data
from workergen.jinja_cache import CACHE_SUBDIR
from workergen.questions import load_questionnaire
from workergen.render import render_project
from workergen.template_source import TemplateSource

RENDERS: tuple[Sequence[str], ...] = (
    ("broker=redis", "http_api=true", "result_backend=redis"),
    ("broker=rabbitmq", "rabbitmq_queue_type=quorum"),
    ("broker=sqs",),
)
"""`--data` of the renders whose compiled code is shipped: between them every file is rendered."""


def compile_template(source: TemplateSource, destination: Path) -> Path:
    """Compile what `workergen new` compiles for each of `RENDERS` into `destination`.

    Returns the directory to ship (one folder per environment's settings). The
    answers are checked before anything is rendered, as `new` checks them before
    it imports copier.
    """
    questionnaire = load_questionnaire(source.copier_yml)
    with _cache_home(destination), tempfile.TemporaryDirectory() as scratch:
        all_answers = []
        for data in RENDERS:
            given = merge_given(questionnaire, flags={}, data=parse_data(data), flag_names={})
            all_answers.append(
                collect_answers(
                    questionnaire,
                    given,
                    env=make_environment(questionnaire.envops),
                    use_defaults=True,
                    ask=None,
                    fallback_defaults={"project_name": "shipped"},
                    base_context={"_folder_name": "shipped"},
                )
            )
        for number, answers in enumerate(all_answers):
            render_project(source, Path(scratch) / str(number) / "shipped", answers)
    return destination / "workergen" / CACHE_SUBDIR


@contextmanager
def _cache_home(path: Path) -> Iterator[None]:
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(path)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = previous
