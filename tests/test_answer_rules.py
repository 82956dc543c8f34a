"""One home per rule: the runtime's naming rules, and copier.yml's validators built from them."""

from __future__ import annotations

import random
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from workergen.answers import answer_problem, collect_answers, condition_text, make_environment
from workergen.errors import UnaskedAnswerError
from workergen.questions import load_questionnaire

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import sync_validators  # noqa: E402

naming = sync_validators.load_naming()
questionnaire = load_questionnaire(REPO_ROOT / "copier.yml")
env = make_environment(questionnaire.envops)

# Values near every edge of the rules: whitespace and newlines around good values,
# quotes, backslashes, template syntax, non-ASCII, control characters, reserved words.
GOOD = ["billing", "My Shop-2", "ventas", "default", "critical,default,batch", "us-east-1"]
EDGES = [
    "",
    " ",
    "\n",
    "a",
    "A",
    "_",
    "-",
    "1abc",
    "a-b",
    "a_b",
    "a b",
    "a.b",
    "a/b",
    "../x",
    "x_",
    "é",
    "rocket 🚀",
    "naïve café",
    "\ud800",
    "\x00",
    "\x7f",
    "\x85",
    "tab\there",
    'quote"s',
    "it's",
    "back\\slash",
    "{{ 7*7 }}",
    "{% if %}",
    "a{#b",
    "{x}",
    "default,",
    ",default",
    "default,,batch",
    "default ,  batch",
    "default,default",
    "default,Default",
    "batch",
    "default,x-dlq",
    "default,dlq",
    "default,dlq-x",
    "eu-west-3",
    "us-east-1a",
    "useast1",
    "x" * 300,
]
RESERVED = sorted(
    naming.PYTHON_KEYWORDS
    | naming.STANDARD_LIBRARY
    | naming.DEPENDENCY_PACKAGES
    | naming.RESERVED_LANES
)


def table() -> list[str]:
    values = [*GOOD, *EDGES, *RESERVED]
    values += [f"default,{word}" for word in sorted(naming.RESERVED_LANES)]
    for good in [*GOOD, *EDGES[:12]]:
        values += [good + "\n", good + " ", " " + good, good + "\r\n", good + "\t"]
    alphabet = "abz09_- ,.'\"\\/{}%#\n\t\x00éA🚀"
    rng = random.Random(20261201)
    values += ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(400)]
    return list(dict.fromkeys(values))


TABLE = table()


@pytest.mark.parametrize("question", sorted(naming.ANSWER_RULES))
def test_copier_yml_validators_agree_with_the_python_rules(question: str):
    rule = naming.ANSWER_RULES[question]
    disagreements = [
        (value, rule.problem(value), found)
        for value in TABLE
        if (found := answer_problem(questionnaire.get(question), value, {}, env))
        != rule.problem(value)
    ]
    assert disagreements == []


def test_copier_yml_validators_are_generated_from_the_rules():
    assert sync_validators.main(["--check"]) == 0


def test_a_hand_edited_validator_is_caught(tmp_path: Path):
    text = (REPO_ROOT / "copier.yml").read_text(encoding="utf-8")
    edited = text.replace("[a-z][a-z0-9_-]*", "[a-z][a-z0-9_-]*$", 1)
    assert edited != text
    assert sync_validators.synced(edited, naming.ANSWER_RULES) == text


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("queue_namespace", "ns\n"),
        ("package_name", "billing\n"),
        ("project_name", "billing\n"),
        ("sqs_region", "us-east-1\n"),
        ("description", "one\nline"),
        ("description", "bell\x07"),
        ("package_name", "uuid"),
        ("package_name", "threading"),
        ("package_name", "inspect"),
        ("package_name", "kombu"),
        ("package_name", "billing_"),
        ("lanes", "default,unacked"),
        ("lanes", "default,unacked_index"),
        ("lanes", "default,holders"),
        ("lanes", "default,celery"),
    ],
)
def test_values_that_break_a_project_are_refused(question: str, value: str):
    assert naming.ANSWER_RULES[question].problem(value) is not None


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("description", 'rocket 🚀 "quoted" and back\\slash, it\'s {x}'),
        ("package_name", "billing_2"),
        ("queue_namespace", ""),
        ("lanes", "default, emails ,batch_2"),
        ("sqs_region", "ap-southeast-2"),
    ],
)
def test_values_a_project_can_carry_are_accepted(question: str, value: str):
    assert naming.ANSWER_RULES[question].problem(value) is None


def test_every_standard_library_module_is_refused_as_package_name():
    public = {name for name in sys.stdlib_module_names if re.fullmatch(r"[a-z][a-z0-9_]*", name)}
    assert public - naming.STANDARD_LIBRARY == set()


def dependency_top_levels(requirements: list[str]) -> set[str]:
    """The importable top-level names of the installed distributions `requirements` pull in."""
    seen: set[str] = set()
    names: set[str] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        listed = dist.read_text("top_level.txt")
        if listed:
            names |= set(listed.split())
        else:
            for file in dist.files or []:
                top = file.parts[0].removesuffix(".py")
                if top.isidentifier():
                    names.add(top)
        extras = list(requirement.extras) or [""]
        for text in dist.requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                todo.append(needed)
    return {name for name in names if re.fullmatch(r"[a-z][a-z0-9_]*", name)}


def test_every_dependency_package_is_refused_as_package_name():
    root = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # The root's `project` extra is everything a generated project runs with.
    requirements = [*root["project"]["optional-dependencies"]["project"], "typer", "pytest", "ruff"]
    assert dependency_top_levels(requirements) - naming.DEPENDENCY_PACKAGES == set()


HOSTILE_DESCRIPTION = 'rocket 🚀 "quoted" back\\slash \\n it\'s {x} <b>&amp; #hash \u2028 end'


@pytest.mark.parametrize("broker", ["redis", "sqs"])
def test_every_rendered_toml_yaml_and_python_file_parses_for_accepted_answers(render, broker: str):
    import ast

    import yaml

    answers = {
        "description": HOSTILE_DESCRIPTION,
        "queue_namespace": "my-ns_2",
        "lanes": "default , a-b,c_d",
        "broker": broker,
    }
    for question, value in answers.items():
        if question in naming.ANSWER_RULES:
            assert naming.ANSWER_RULES[question].problem(value) is None, question
    project = render(**answers)

    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["description"] == HOSTILE_DESCRIPTION
    files = [path for path in project.rglob("*") if path.is_file()]
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            tomllib.loads(text)
        elif path.suffix in (".yml", ".yaml"):
            list(yaml.safe_load_all(text))
        elif path.suffix == ".py":
            ast.parse(text, filename=str(path))
    init = ast.parse((project / "billing" / "__init__.py").read_text(encoding="utf-8"))
    assert ast.get_docstring(init) == HOSTILE_DESCRIPTION


def accepted_descriptions() -> list[str]:
    rng = random.Random(7)
    alphabet = [chr(code) for code in range(0x20, 0x7F)] + list("éñ€🚀\u2028\u00a0\U0010fffd")
    values = ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(300)]
    values += ['"""', "'''", "\\", '\\"', "a\\", "{x}", "#", "\\u0041", "\\U0001F680"]
    return [value for value in values if naming.DESCRIPTION_RULE.problem(value) is None]


@pytest.mark.parametrize("broker", ["redis", "rabbitmq", "sqs"])
def test_any_accepted_description_renders_valid_toml_and_python(broker: str):
    import ast

    template = REPO_ROOT / "template"
    pyproject = env.from_string((template / "pyproject.toml.jinja").read_text(encoding="utf-8"))
    init = env.from_string(
        (template / "{{package_name}}" / "__init__.py.jinja").read_text(encoding="utf-8")
    )
    descriptions = accepted_descriptions()
    assert len(descriptions) > 250
    for description in descriptions:
        answers = {"package_name": "billing", "description": description, "broker": broker}
        parsed = tomllib.loads(pyproject.render(answers))
        assert parsed["project"]["description"] == description
        assert ast.get_docstring(ast.parse(init.render(answers)), clean=False) == description


# Asked only under a condition (`when` in copier.yml) that the default answers leave false.
CONDITIONAL = [
    question
    for question in questionnaire.asked
    if isinstance(question.when, str) and question.has_default
]


def test_some_questions_are_asked_only_under_a_condition():
    assert {question.name for question in CONDITIONAL} >= {"rabbitmq_queue_type", "sqs_region"}


@pytest.mark.parametrize("question", CONDITIONAL, ids=lambda question: question.name)
def test_an_answer_to_a_question_not_asked_is_refused_naming_the_condition(question):
    given = {question.name: str(question.default)}
    # Every other question takes its default; none of these conditions holds for them.
    with pytest.raises(UnaskedAnswerError) as refused:
        collect_answers(
            questionnaire,
            given,
            env=env,
            use_defaults=True,
            ask=None,
            base_context={"_folder_name": "billing"},
        )

    assert refused.value.question == question.name
    assert f"{question.name} is not asked for these answers" in refused.value.message
    assert condition_text(question.when) in refused.value.message
    assert "{{" not in refused.value.message
