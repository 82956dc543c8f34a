"""Question loading, answer validation and answer collection, against the real copier.yml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workergen.answers import (
    answer_problem,
    cast_answer,
    collect_answers,
    make_environment,
    merge_given,
    parse_data,
    render_default,
)
from workergen.errors import (
    ConflictingAnswerError,
    InvalidAnswerError,
    MalformedDataError,
    MissingAnswersError,
    QuestionsFileError,
    TemplateNotFoundError,
    UnknownDataKeyError,
)
from workergen.options import QUESTION_FLAGS
from workergen.questions import Choice, Question, load_questionnaire, parse_question
from workergen.template_source import locate_template

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def questionnaire():
    return load_questionnaire(REPO / "copier.yml")


@pytest.fixture(scope="module")
def env(questionnaire):
    return make_environment(questionnaire.envops)


# --- loading ---------------------------------------------------------------


def test_loads_the_questions_of_copier_yml_in_order(questionnaire):
    names = [question.name for question in questionnaire.questions]
    assert names[:8] == [
        "project_name",
        "package_name",
        "description",
        "broker",
        "rabbitmq_queue_type",
        "queue_namespace",
        "lanes",
        "result_backend",
    ]
    assert all(not name.startswith("_") for name in names)
    assert questionnaire.envops == {"keep_trailing_newline": True}


def test_question_fields_come_from_copier_yml(questionnaire):
    project = questionnaire.get("project_name")
    assert project.type == "str"
    assert project.help
    assert project.has_default and "_folder_name" in project.default
    assert "regex_search" in project.validator

    package = questionnaire.get("package_name")
    assert package.has_default and "project_name" in package.default

    broker = questionnaire.get("broker")
    assert Choice(title="Redis", value="redis") in broker.choices


def test_when_false_questions_are_computed_and_never_asked(questionnaire):
    lane_list = questionnaire.get("lane_list")
    assert lane_list.computed
    assert lane_list.type == "yaml"
    assert lane_list not in questionnaire.asked
    assert all(not question.computed for question in questionnaire.asked)


def test_every_flag_answers_a_real_question(questionnaire):
    asked = {question.name for question in questionnaire.asked}
    assert set(QUESTION_FLAGS) <= asked


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("plain", Question(name="q", type="str", default="plain", has_default=True)),
        (3, Question(name="q", type="int", default=3, has_default=True)),
        (True, Question(name="q", type="bool", default=True, has_default=True)),
        ({"help": "no default"}, Question(name="q", type="yaml", help="no default")),
        (
            {"type": "str", "choices": ["a", "b"], "default": "a"},
            Question(
                name="q",
                type="str",
                default="a",
                has_default=True,
                choices=(Choice("a", "a"), Choice("b", "b")),
            ),
        ),
        (
            {"type": "str", "choices": {"Alpha": "a", "Beta": {"value": "b"}}},
            Question(name="q", type="str", choices=(Choice("Alpha", "a"), Choice("Beta", "b"))),
        ),
        (
            {"type": "str", "choices": [["Alpha", "a"]]},
            Question(name="q", type="str", choices=(Choice("Alpha", "a"),)),
        ),
        ({"type": "str", "when": False}, Question(name="q", type="str", when=False)),
    ],
)
def test_parse_question(spec: Any, expected: Question):
    assert parse_question("q", spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "datetime"},
        {"type": "str", "multiselect": True, "choices": ["a"]},
        {"type": "str", "choices": "not a list"},
        {"type": "str", "when": 3},
    ],
)
def test_parse_question_refuses_what_workergen_cannot_ask(spec: Any):
    with pytest.raises(ValueError, match="'q'"):
        parse_question("q", spec)


def test_unreadable_copier_yml_is_a_user_error(tmp_path: Path):
    path = tmp_path / "copier.yml"
    path.write_text("- a list\n- not questions\n")
    with pytest.raises(QuestionsFileError, match="not a mapping"):
        load_questionnaire(path)


# --- template source -------------------------------------------------------


def test_locate_template_prefers_the_wheel_copy(tmp_path: Path):
    package = tmp_path / "site-packages" / "workergen"
    (package / "_template").mkdir(parents=True)
    (package / "_template" / "copier.yml").write_text("{}\n")
    source = locate_template(package)
    assert source.path == package / "_template"
    assert source.vcs_ref is None


def test_locate_template_falls_back_to_the_repository(tmp_path: Path):
    package = tmp_path / "generator" / "workergen"
    package.mkdir(parents=True)
    (tmp_path / "copier.yml").write_text("{}\n")
    (tmp_path / ".git").mkdir()
    source = locate_template(package)
    assert source.path == tmp_path
    # A git checkout renders its working tree, not its latest tag.
    assert source.vcs_ref == "HEAD"


def test_locate_template_finds_the_installed_or_checked_out_template():
    import workergen

    source = locate_template()
    assert source.copier_yml.is_file()
    assert source.path in {REPO, Path(workergen.__file__).resolve().parent / "_template"}


def test_locate_template_says_where_it_looked(tmp_path: Path):
    with pytest.raises(TemplateNotFoundError, match="_template"):
        locate_template(tmp_path / "a" / "workergen")


# --- casting and defaults --------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "raw", "expected"),
    [
        ("str", "text", "text"),
        ("str", None, ""),
        ("bool", "yes", True),
        ("bool", "off", False),
        ("int", " 4 ", 4),
        ("float", "0.5", 0.5),
        ("json", '{"a": 1}', {"a": 1}),
        ("yaml", "[a, b]", ["a", "b"]),
    ],
)
def test_cast_answer(type_name: str, raw: Any, expected: Any):
    assert cast_answer(Question(name="q", type=type_name), raw) == expected


@pytest.mark.parametrize(("type_name", "raw"), [("bool", "maybe"), ("int", "4.5"), ("json", "{")])
def test_cast_answer_refuses(type_name: str, raw: str):
    with pytest.raises(ValueError, match="expected"):
        cast_answer(Question(name="q", type=type_name), raw)


@pytest.mark.parametrize(
    ("question", "context", "expected"),
    [
        ("project_name", {"_folder_name": "billing"}, "billing"),
        ("package_name", {"project_name": " My Shop-Front "}, "my_shop_front"),
        ("description", {"project_name": "billing"}, "Background workers for billing"),
        ("queue_namespace", {"package_name": "billing"}, "billing"),
        ("lane_list", {"lanes": "critical, default"}, ["critical", "default"]),
    ],
)
def test_defaults_render_from_earlier_answers(questionnaire, env, question, context, expected):
    assert render_default(questionnaire.get(question), context, env) == expected


# --- validation ------------------------------------------------------------

TEMPLATE_SYNTAX = ["{{ 7*7 }}", "{% if 1 %}x{% endif %}", "a{#b"]


@pytest.mark.parametrize(
    ("question", "value", "problem"),
    [
        ("project_name", "billing", None),
        ("project_name", "My Shop-2", None),
        ("project_name", "", "required"),
        ("project_name", "1abc", "start with a letter"),
        ("project_name", "../evil", "start with a letter"),
        ("project_name", "a/../../evil", "only letters"),
        ("package_name", "billing", None),
        ("package_name", "_private", "lowercase Python identifier"),
        ("package_name", "billing_", "lowercase Python identifier"),
        ("package_name", "billing\n", "lowercase Python identifier"),
        ("package_name", "uuid", "shadow"),
        ("package_name", "class", "Python keyword"),
        ("package_name", "1abc", "lowercase Python identifier"),
        ("package_name", "my pkg", "lowercase Python identifier"),
        ("package_name", "../evil", "lowercase Python identifier"),
        ("package_name", "Billing", "lowercase Python identifier"),
        ("package_name", "celery", "shadow"),
        ("description", "Sends invoices", None),
        ("description", "two\nlines", "single line"),
        ("broker", "redis", None),
        ("broker", "kafka", "one of: redis"),
        ("queue_namespace", "", None),
        ("queue_namespace", "ventas", None),
        ("queue_namespace", "Ventas", "lowercase letter"),
        ("queue_namespace", "a b", "lowercase letter"),
        ("queue_namespace", "../x", "lowercase letter"),
        ("lanes", "default", None),
        ("lanes", "critical, default ,batch", None),
        ("lanes", "critical,batch", "must include 'default'"),
        ("lanes", "default,default", "only once"),
        ("lanes", "default,dlq", "invalid lane 'dlq'"),
        ("lanes", "default,emails-dlq", "invalid lane 'emails-dlq'"),
        ("lanes", "default,Batch", "invalid lane 'Batch'"),
        ("lanes", "default,", "invalid lane ''"),
        ("result_backend", "none", None),
        ("result_backend", "redis", None),
        ("result_backend", "memcached", "one of"),
        *[
            (question, value, "template syntax")
            for question in ("project_name", "package_name", "description", "queue_namespace")
            for value in TEMPLATE_SYNTAX
        ],
        ("lanes", "{{ 7*7 }}", "template syntax"),
    ],
)
def test_answer_validation(questionnaire, env, question, value, problem):
    found = answer_problem(questionnaire.get(question), value, {}, env)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


# --- merging and collecting ------------------------------------------------


def test_parse_data():
    assert parse_data(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}


@pytest.mark.parametrize("item", ["novalue", "=value"])
def test_parse_data_refuses_malformed_items(item: str):
    with pytest.raises(MalformedDataError, match="KEY=VALUE"):
        parse_data([item])


def test_merge_given_combines_flags_and_data(questionnaire):
    given = merge_given(
        questionnaire,
        flags={"project_name": "billing", "package_name": None},
        data={"lanes": "default", "project_name": "billing"},
        flag_names=QUESTION_FLAGS,
    )
    assert given == {"project_name": "billing", "lanes": "default"}


def test_merge_given_refuses_unknown_keys_and_lists_the_known_ones(questionnaire):
    with pytest.raises(UnknownDataKeyError) as caught:
        merge_given(questionnaire, flags={}, data={"colour": "red"}, flag_names=QUESTION_FLAGS)
    assert "colour" in str(caught.value)
    assert "package_name" in str(caught.value) and "result_backend" in str(caught.value)


def test_merge_given_refuses_computed_keys(questionnaire):
    with pytest.raises(UnknownDataKeyError):
        merge_given(questionnaire, flags={}, data={"lane_list": "[a]"}, flag_names={})


def test_merge_given_refuses_clashing_answers(questionnaire):
    with pytest.raises(ConflictingAnswerError, match="--package"):
        merge_given(
            questionnaire,
            flags={"package_name": "one"},
            data={"package_name": "two"},
            flag_names=QUESTION_FLAGS,
        )


def test_collect_with_defaults(questionnaire, env):
    answers = collect_answers(
        questionnaire,
        {"project_name": "Shop Front", "lanes": "default,batch"},
        env=env,
        use_defaults=True,
        ask=None,
    )
    assert answers == {
        "project_name": "Shop Front",
        "package_name": "shop_front",
        "description": "Background workers for Shop Front",
        "broker": "redis",
        "queue_namespace": "shop_front",
        "lanes": "default,batch",
        "result_backend": "none",
        "http_api": False,
    }


def test_collect_takes_the_project_name_from_the_folder(questionnaire, env):
    answers = collect_answers(
        questionnaire,
        {},
        env=env,
        use_defaults=True,
        ask=None,
        base_context={"_folder_name": "billing"},
    )
    assert answers["project_name"] == "billing"
    assert answers["package_name"] == "billing"


def test_collect_without_terminal_names_every_missing_flag(questionnaire, env):
    with pytest.raises(MissingAnswersError) as caught:
        collect_answers(
            questionnaire,
            {"project_name": "billing"},
            env=env,
            use_defaults=False,
            ask=None,
            flag_names=QUESTION_FLAGS,
        )
    message = str(caught.value)
    assert "--package" in message and "--result-backend" in message
    assert "--name" not in caught.value.flags
    assert "--defaults" in message


def test_collect_with_defaults_but_no_folder_name_asks_for_the_flag(questionnaire, env):
    with pytest.raises(InvalidAnswerError, match="project name is required") as caught:
        collect_answers(
            questionnaire, {}, env=env, use_defaults=True, ask=None, flag_names=QUESTION_FLAGS
        )
    assert "--name" in str(caught.value)


def test_collect_validates_defaults_too(questionnaire, env):
    with pytest.raises(InvalidAnswerError, match="Python keyword") as caught:
        collect_answers(
            questionnaire,
            {"project_name": "class"},
            env=env,
            use_defaults=True,
            ask=None,
            flag_names=QUESTION_FLAGS,
        )
    assert "--package" in str(caught.value)


def test_collect_asks_only_what_is_missing_with_rendered_defaults(questionnaire, env):
    asked: list[tuple[str, Any]] = []

    def ask(question: Question, default: Any, validate: Any) -> Any:
        asked.append((question.name, default))
        assert validate("default,dlq") if question.name == "lanes" else True
        return "default" if question.name == "lanes" else default

    answers = collect_answers(
        questionnaire,
        {"project_name": "billing", "broker": "redis"},
        env=env,
        use_defaults=False,
        ask=ask,
        fallback_defaults={"project_name": "ignored"},
    )
    assert [name for name, _ in asked] == [
        "package_name",
        "description",
        "queue_namespace",
        "lanes",
        "result_backend",
        "http_api",
    ]
    assert dict(asked)["package_name"] == "billing"
    assert dict(asked)["queue_namespace"] == "billing"
    assert answers["lanes"] == "default"


def test_collect_refuses_an_invalid_given_answer_before_asking_anything(questionnaire, env):
    def ask(*_: Any) -> Any:
        raise AssertionError("must not prompt")

    with pytest.raises(InvalidAnswerError, match="template syntax"):
        collect_answers(
            questionnaire,
            {"project_name": "{{ 7*7 }}"},
            env=env,
            use_defaults=False,
            ask=ask,
        )


def test_docs_describe_every_question_with_its_flag(questionnaire):
    docs = (REPO / "docs" / "questions.md").read_text()
    for question in questionnaire.asked:
        flag = QUESTION_FLAGS.get(question.name, "--data")
        assert f"| `{question.name}` | `{flag}` |" in docs, question.name
