"""`workergen new`: answers from flags, defaults and prompts; refusals leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from unittest.mock import patch

import copier
import jinja2
import jinja2.ext
import pytest
import yaml
from jinja2.bccache import bc_magic
from jinja2.sandbox import SandboxedEnvironment
from typer.testing import CliRunner

from support.releases import commit_all, git
from workergen.answers import make_environment
from workergen.cli import app
from workergen.commands import new as new_command
from workergen.errors import TemplateRepositoryError
from workergen.jinja_cache import compiled_template_cache, reuse_compiled
from workergen.render import render_project
from workergen.template_source import TemplateSource, locate_template

runner = CliRunner()

REPO_ROOT = Path(__file__).resolve().parents[1]


def run(*args: str):
    return runner.invoke(app, list(args))


def answers_of(project: Path) -> dict:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


# --- rendering -------------------------------------------------------------


def test_defaults_render_a_project_named_after_its_directory(tmp_path: Path):
    target = tmp_path / "billing"
    result = run("new", str(target), "--defaults")

    assert result.exit_code == 0, result.output
    assert (target / "pyproject.toml").is_file()
    assert (target / "billing").is_dir()
    answers = answers_of(target)
    assert answers["project_name"] == "billing"
    assert answers["package_name"] == "billing"
    assert answers["lanes"] == "critical,default,batch"
    # Only the project is left: no staging directory beside it.
    assert tree(tmp_path) == {"billing"} | {f"billing/{p}" for p in tree(target)}
    assert "create pyproject.toml" in result.output
    assert "python -m billing queue dispatch hello" in result.output
    assert "python -m billing queue work" in result.output


def test_flags_and_data_answer_the_questions(tmp_path: Path):
    target = tmp_path / "shop"
    result = run(
        "new",
        str(target),
        "--name",
        "Shop Front",
        "--package",
        "shopfront",
        "--description",
        "Sends invoices",
        "--broker",
        "redis",
        "--namespace",
        "",
        "--lanes",
        "default,emails",
        "--data",
        "result_backend=redis",
        "--data",
        "http_api=false",
    )

    assert result.exit_code == 0, result.output
    answers = answers_of(target)
    assert answers["project_name"] == "Shop Front"
    assert answers["package_name"] == "shopfront"
    assert answers["description"] == "Sends invoices"
    assert answers["queue_namespace"] == ""
    assert answers["lanes"] == "default,emails"
    assert answers["result_backend"] == "redis"
    assert (target / "shopfront").is_dir()


def files_of(project: Path) -> dict[str, tuple[bytes, bool]]:
    """Each file's bytes and whether it is executable, by path in the project."""
    return {
        str(path.relative_to(project)): (path.read_bytes(), os.access(path, os.X_OK))
        for path in sorted(project.rglob("*"))
        if path.is_file()
    }


def without_provenance(files: dict[str, tuple[bytes, bool]]) -> dict[str, tuple[bytes, bool]]:
    """The files, with the answers file's lines naming the template's address and version cut."""
    answers, executable = files[".copier-answers.yml"]
    kept = [line for line in answers.splitlines(keepends=True) if not line.startswith(b"_")]
    return {**files, ".copier-answers.yml": (b"".join(kept), executable)}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--package", "shop"], id="redis"),
        pytest.param(
            ["--package", "shop", "--broker", "rabbitmq", "--data", "http_api=true"],
            id="rabbitmq-http_api",
        ),
    ],
)
def test_new_writes_what_copier_copy_writes(tmp_path: Path, args: list[str]):
    # `new` renders with copier's worker minus work that changes nothing: the same files.
    ours = tmp_path / "ours" / "shop"
    result = run("new", str(ours), "--defaults", *args)
    assert result.exit_code == 0, result.output
    answers = {k: v for k, v in answers_of(ours).items() if not k.startswith("_")}
    source = locate_template()
    theirs = tmp_path / "theirs" / "shop"
    copier.run_copy(
        str(source.path),
        theirs,
        data=answers,
        vcs_ref=source.vcs_ref,
        defaults=True,
        quiet=True,
        settings=copier.Settings(),
    )

    assert without_provenance(files_of(ours)) == without_provenance(files_of(theirs))


def test_a_checkout_renders_its_working_tree_as_copier_does(tmp_path: Path):
    # A checkout at HEAD renders its working tree without copier cloning it: uncommitted
    # edits and new files in, deleted and git-ignored files out, executable bits kept.
    repo = tmp_path / "repo"
    (repo / "template").mkdir(parents=True)
    (repo / "copier.yml").write_text("_subdirectory: template\nname:\n  type: str\n  default: x\n")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "notes.txt").write_text("not the template\n")
    (repo / "template" / "kept.txt").write_text("kept\n")
    (repo / "template" / "edited.txt.jinja").write_text("{{ name }} before\n")
    (repo / "template" / "deleted.txt").write_text("gone\n")
    (repo / "template" / "run.sh").write_text("#!/bin/sh\n")
    (repo / "template" / "run.sh").chmod(0o755)
    git(repo, "init", "-q")
    commit_all(repo, "template")
    (repo / "template" / "edited.txt.jinja").write_text("{{ name }} after\n")
    (repo / "template" / "deleted.txt").unlink()
    (repo / "template" / "{{ name }}.new.txt").write_text("new\n")
    (repo / "template" / "debug.log").write_text("ignored\n")
    source = TemplateSource(path=repo, vcs_ref="HEAD", history=repo)

    ours = tmp_path / "ours"
    render_project(source, ours, {"name": "y"})
    theirs = tmp_path / "theirs"
    copier.run_copy(
        str(repo), theirs, data={"name": "y"}, vcs_ref="HEAD", defaults=True, quiet=True
    )

    assert set(files_of(ours)) == {"kept.txt", "edited.txt", "run.sh", "y.new.txt"}
    assert (ours / "edited.txt").read_text() == "y after\n"
    assert files_of(ours) == files_of(theirs)


def test_path_parts_are_compiled_once_and_plain_ones_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Copier renders every part of every path on its own; a part with no Jinja in it
    # renders as itself, so it is never compiled, and one with Jinja is compiled once.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = SandboxedEnvironment(keep_trailing_newline=True)  # as the template's _envops
    compiled: list[str] = []
    compile_source = env.compile
    env.compile = lambda source, *args, **kwargs: (
        compiled.append(source) or compile_source(source, *args, **kwargs)
    )
    env = reuse_compiled(env)
    context = {"package_name": "shop", "http_api": False}
    sources = ["jobs", "__init__.py", "", "{{ package_name }}", "{% if http_api %}x{% endif %}"]
    for _ in range(3):
        rendered = [env.from_string(source).render(**context) for source in sources]
        assert rendered == ["jobs", "__init__.py", "", "shop", ""]

    assert compiled == ["{{ package_name }}", "{% if http_api %}x{% endif %}"]
    # Line ends are Jinja's to normalise: text holding one is compiled.
    plain = SandboxedEnvironment(keep_trailing_newline=True)
    assert env.from_string("a\r\n").render() == plain.from_string("a\r\n").render() == "a\n"


def small_template(path: Path, envops: str = "keep_trailing_newline: true") -> TemplateSource:
    """A template with a templated file, a templated name and a plain file."""
    (path / "t").mkdir(parents=True)
    (path / "copier.yml").write_text(
        f"_subdirectory: t\n_envops: {{{envops}}}\nname:\n  type: str\n  default: x\n"
    )
    (path / "t" / "a.txt.jinja").write_text("{{ name }}\n")
    (path / "t" / "{% if name %}{{ name }}.txt{% endif %}").write_text("plain\n")
    return TemplateSource(path=path)


def test_a_render_reuses_what_an_earlier_one_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    compiled: list[str] = []
    compile_source = jinja2.Environment.compile

    def counting(self, source, *args, **kwargs):
        if isinstance(source, str):  # copier also compiles the non-text values in copier.yml
            compiled.append(source)
        return compile_source(self, source, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    source = small_template(tmp_path / "template")

    render_project(source, tmp_path / "one", {"name": "y"})
    assert "{{ name }}\n" in compiled
    first = len(compiled)
    render_project(source, tmp_path / "two", {"name": "y"})
    assert len(compiled) == first
    assert files_of(tmp_path / "two") == files_of(tmp_path / "one")
    assert (tmp_path / "two" / "y.txt").read_text() == "plain\n"

    # An edited template is compiled again; damaged entries are compiled and replaced.
    (source.path / "t" / "a.txt.jinja").write_text("{{ name }}!\n")
    render_project(source, tmp_path / "three", {"name": "y"})
    assert compiled[first:] == ["{{ name }}!\n"]
    assert (tmp_path / "three" / "a.txt").read_text() == "y!\n"
    for entry in (tmp_path / "cache").rglob("*.cache"):
        entry.write_bytes(bc_magic + b"damaged")
    render_project(source, tmp_path / "four", {"name": "z"})
    assert (tmp_path / "four" / "a.txt").read_text() == "z!\n"
    render_project(source, tmp_path / "five", {"name": "z"})
    assert files_of(tmp_path / "five") == files_of(tmp_path / "four")


def test_templates_compiled_with_other_settings_are_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The same source compiles to other code under other _envops: here, other delimiters.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jinja = small_template(tmp_path / "jinja")
    brackets = small_template(
        tmp_path / "brackets", 'variable_start_string: "[[", variable_end_string: "]]"'
    )

    render_project(jinja, tmp_path / "one", {"name": "y"})
    render_project(brackets, tmp_path / "two", {"name": "y"})
    render_project(jinja, tmp_path / "three", {"name": "y"})

    assert (tmp_path / "one" / "a.txt").read_text() == "y\n"
    assert (tmp_path / "two" / "a.txt").read_text() == "{{ name }}\n"
    assert (tmp_path / "three" / "a.txt").read_text() == "y\n"


def test_the_answers_checks_reuse_what_an_earlier_run_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Each run checks the answers in an environment of its own, as copier would.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    compiled: list[str] = []
    compile_source = jinja2.Environment.compile
    monkeypatch.setattr(
        jinja2.Environment,
        "compile",
        lambda self, source, *args, **kwargs: (
            compiled.append(source) or compile_source(self, source, *args, **kwargs)
        ),
    )
    validator = "{% if name | regex_search('^[a-z]+$') is none %}bad{% endif %}"

    earlier = make_environment({"keep_trailing_newline": True}).from_string(validator)
    later = make_environment({"keep_trailing_newline": True}).from_string(validator)

    assert compiled == [validator]
    assert earlier.render(name="Ab") == later.render(name="Ab") == "bad"
    assert later.render(name="ab") == ""


class TemplateOwnExtension(jinja2.ext.Extension):
    """An extension whose version workergen cannot know."""


def test_a_template_with_jinja_extensions_of_its_own_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    known = SandboxedEnvironment(extensions=["jinja2.ext.do"])
    own = SandboxedEnvironment(extensions=["jinja2.ext.do", TemplateOwnExtension])

    assert compiled_template_cache(known) is not None
    assert compiled_template_cache(own) is None


def test_what_a_wheel_ships_compiled_is_read_when_the_users_cache_lacks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A wheel's build compiles the template into a cache folder that it ships; a
    # first render reads its entries there, compiles nothing and writes nothing.
    def environment() -> SandboxedEnvironment:
        return SandboxedEnvironment(loader=jinja2.DictLoader({"a.txt.jinja": "{{ x }}!"}))

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "build"))
    built = environment()
    built.bytecode_cache = compiled_template_cache(built)
    built.get_template("a.txt.jinja")
    shipped = tmp_path / "build" / "workergen" / "templates"

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    env = environment()
    env.bytecode_cache = compiled_template_cache(env, shipped=shipped)
    compiled: list[str] = []
    compile_source = env.compile
    monkeypatch.setattr(
        env, "compile", lambda *a, **k: compiled.append(a) or compile_source(*a, **k)
    )

    assert env.get_template("a.txt.jinja").render(x=1) == "1!"
    assert compiled == []
    assert not list((tmp_path / "user").rglob("*.cache"))

    # An entry whose source changed since the build is compiled, and kept by the user.
    env.loader = jinja2.DictLoader({"a.txt.jinja": "{{ x }}?"})
    env.cache = None
    assert env.get_template("a.txt.jinja").render(x=1) == "1?"
    assert len(compiled) == 1
    assert len(list((tmp_path / "user").rglob("*.cache"))) == 1


def test_a_plain_directory_is_not_asked_about_as_a_git_bundle(tmp_path: Path):
    # Copier asks git whether a template directory is a bundle (a scratch repository
    # and two git processes); a directory never is, and `new` does not ask.
    calls = tmp_path / "git-calls"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real_git} "$@"\n')
    wrapper.chmod(0o755)
    source = small_template(tmp_path / "template")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "workergen", "new", str(tmp_path / "out")),
            *("--defaults", "--template", str(source.path)),
        ],
        env={**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "a.txt").read_text() == "x\n"
    asked = calls.read_text().splitlines() if calls.exists() else []
    assert not [line for line in asked if "bundle" in line], asked


def test_a_render_without_a_usable_cache_directory_still_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "not-a-directory").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-directory"))
    source = small_template(tmp_path / "template")

    render_project(source, tmp_path / "one", {"name": "y"})
    assert (tmp_path / "one" / "a.txt").read_text() == "y\n"


def test_missing_parent_directories_are_created(tmp_path: Path):
    target = tmp_path / "a" / "b" / "billing"
    result = run("new", str(target), "--defaults")
    assert result.exit_code == 0, result.output
    assert (target / ".copier-answers.yml").is_file()


def test_the_current_directory_as_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    project = tmp_path / "billing"
    project.mkdir()
    monkeypatch.chdir(project)
    result = run("new", ".", "--defaults")
    assert result.exit_code == 0, result.output
    assert answers_of(project)["project_name"] == "billing"
    assert "cd " not in result.output  # already there


def test_an_empty_target_is_filled_without_force(tmp_path: Path):
    target = tmp_path / "billing"
    target.mkdir()
    result = run("new", str(target), "--defaults")
    assert result.exit_code == 0, result.output
    assert (target / "pyproject.toml").is_file()


def test_a_non_empty_target_is_refused_without_force(tmp_path: Path):
    target = tmp_path / "billing"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")

    result = run("new", str(target), "--defaults")

    assert result.exit_code == 1
    assert "not empty" in result.output and "--force" in result.output
    assert tree(tmp_path) == {"billing", "billing/notes.txt"}


def test_force_writes_into_a_non_empty_target_and_keeps_other_files(tmp_path: Path):
    target = tmp_path / "billing"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    (target / "pyproject.toml").write_text("old\n")

    result = run("new", str(target), "--defaults", "--force")

    assert result.exit_code == 0, result.output
    assert (target / "notes.txt").read_text() == "mine\n"
    assert (target / "pyproject.toml").read_text() != "old\n"
    assert "overwrite pyproject.toml" in result.output
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_file_as_target_is_refused_even_with_force(tmp_path: Path):
    target = tmp_path / "billing"
    target.write_text("a file\n")
    result = run("new", str(target), "--defaults", "--force")
    assert result.exit_code == 1
    assert "not a directory" in result.output
    assert target.read_text() == "a file\n"


def test_a_path_under_a_file_is_refused_in_a_message(tmp_path: Path):
    afile = tmp_path / "afile"
    afile.write_text("a file\n")

    result = run("new", str(afile / "proj"), "--defaults")

    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: cannot create {afile / 'proj'}: ")
    assert f"{afile} is a file, not a directory" in result.output
    assert "Traceback" not in result.output and "FileExistsError" not in result.output
    assert tree(tmp_path) == {"afile"}
    assert afile.read_text() == "a file\n"


def test_a_path_deeper_under_a_file_is_refused_too(tmp_path: Path):
    (tmp_path / "afile").write_text("")

    result = run("new", str(tmp_path / "afile" / "a" / "b" / "proj"), "--defaults", "--pretend")

    assert result.exit_code == 1, result.output
    assert "afile is a file, not a directory" in result.output
    assert tree(tmp_path) == {"afile"}


def test_a_place_that_cannot_be_written_is_refused_in_a_message(tmp_path: Path):
    # /sys refuses a new directory to every user, root included (os.access does not
    # tell root so: then the attempt does).
    target = Path("/sys") / f"workergen-{tmp_path.name}" / "proj"

    result = run("new", str(target), "--defaults")

    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: cannot create {target}: ")
    assert "Traceback" not in result.output
    assert not target.parent.exists()


def test_the_next_steps_start_with_an_environment_and_the_install(tmp_path: Path):
    result = run("new", str(tmp_path / "billing"), "--defaults")

    assert result.exit_code == 0, result.output
    steps = result.output.split("Next steps:\n", 1)[1].splitlines()
    commands = [line.split("#")[0].strip() for line in steps]
    # This suite runs workergen from its checkout: the runtime comes from the checkout too,
    # as the package index may not have this release of it yet.
    assert commands[:4] == [
        f"cd {tmp_path / 'billing'}",
        "python -m venv .venv && . .venv/bin/activate",
        f"python -m pip install -e {REPO_ROOT / 'runtime'} -e '.[dev]'",
        "cp .env.example .env",
    ]
    assert commands[4] == "python -m billing queue work"
    # Outside a checkout the runtime comes from the package index: the plain install.
    with patch("workergen.runtime_source.checkout_runtime", return_value=None):
        assert "python -m pip install -e '.[dev]'" in new_command.next_commands(tmp_path, "billing")
    # What the install step installs: the project's own dependencies, the worker runtime first.
    pyproject = (tmp_path / "billing" / "pyproject.toml").read_text()
    assert '"workergen-runtime>=' in pyproject and "dev = [" in pyproject


def test_pretend_writes_nothing(tmp_path: Path):
    target = tmp_path / "billing"
    result = run("new", str(target), "--defaults", "--pretend")
    assert result.exit_code == 0, result.output
    assert "pyproject.toml" in result.output  # copier lists what it would write
    assert "nothing was written" in result.output
    assert list(tmp_path.iterdir()) == []


# --- refusals --------------------------------------------------------------

TEMPLATE_SYNTAX = "{{ 7*7 }}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--package", "class"], "Python keyword"),
        (["--package", "1abc"], "lowercase Python identifier"),
        (["--package", "my pkg"], "lowercase Python identifier"),
        (["--package", "../evil"], "lowercase Python identifier"),
        (["--name", "../evil"], "start with a letter"),
        (["--name", "1abc"], "start with a letter"),
        (["--name", TEMPLATE_SYNTAX], "template syntax"),
        (["--package", TEMPLATE_SYNTAX], "template syntax"),
        (["--description", TEMPLATE_SYNTAX], "template syntax"),
        (["--namespace", TEMPLATE_SYNTAX], "template syntax"),
        (["--lanes", TEMPLATE_SYNTAX], "template syntax"),
        (["--data", f"description=x {TEMPLATE_SYNTAX}"], "template syntax"),
        (["--lanes", "critical,batch"], "must include 'default'"),
        (["--lanes", "default,dlq"], "invalid lane 'dlq'"),
        (["--lanes", "default,default"], "only once"),
        (["--namespace", "Ventas"], "queue namespace"),
        (["--namespace", "../x"], "queue namespace"),
        # Every pattern matches the whole answer: a final newline does not slip through.
        (["--namespace", "ns\n"], "queue namespace"),
        (["--package", "billing\n"], "lowercase Python identifier"),
        (["--name", "billing\n"], "start with a letter"),
        (["--data", "broker=sqs", "--data", "sqs_region=us-east-1\n"], "SQS region"),
        (["--description", "two\nlines"], "single line"),
        (["--package", "uuid"], "would shadow the module"),
        (["--package", "datetime"], "would shadow the module"),
        (["--package", "pydantic_settings"], "would shadow the module"),
        (["--lanes", "default,unacked"], "invalid lane 'unacked'"),
        (["--lanes", "default,holders"], "invalid lane 'holders'"),
        (["--broker", "kafka"], "must be one of"),
        (["--result-backend", "memcached"], "must be one of"),
        (["--data", "colour=red"], "Known questions: project_name"),
        (["--data", "sqs_regoin=eu-west-3"], "unknown question 'sqs_regoin'"),
        # Asked only on SQS: on a Redis project the answer would be dropped without a word.
        (["--data", "sqs_region=mars"], "sqs_region is not asked for these answers"),
        (["--data", "sqs_region=eu-west-3"], "asks it only when broker == 'sqs'"),
        (["--data", "rabbitmq_queue_type=quorum"], "asks it only when broker == 'rabbitmq'"),
        (
            ["--broker", "sqs", "--data", "rabbitmq_queue_type=quorum"],
            "rabbitmq_queue_type is not asked for these answers",
        ),
        (["--data", "novalue"], "KEY=VALUE"),
        (["--package", "one", "--data", "package_name=two"], "given twice"),
    ],
)
def test_bad_input_is_refused_and_leaves_nothing(tmp_path: Path, args: list[str], message: str):
    target = tmp_path / "billing"
    result = run("new", str(target), "--defaults", *args)

    assert result.exit_code == 1, result.output
    assert message in result.output
    assert result.output.startswith("Error: ")
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_directory_name_that_is_no_project_name_asks_for_name(tmp_path: Path):
    result = run("new", str(tmp_path / "1st"), "--defaults")
    assert result.exit_code == 1
    assert "invalid project_name '1st'" in result.output
    assert "--name" in result.output
    assert list(tmp_path.iterdir()) == []


def test_without_terminal_missing_answers_fail_at_once_naming_flags(tmp_path: Path):
    started = time.monotonic()
    result = run("new", str(tmp_path / "billing"), "--name", "billing")

    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    assert "no terminal" in result.output
    for flag in ("--package", "--description", "--lanes", "--result-backend", "--defaults"):
        assert flag in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_failed_render_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A template that breaks while rendering, after some files are written.
    template = tmp_path / "template-src"
    (template / "t").mkdir(parents=True)
    (template / "copier.yml").write_text(
        textwrap.dedent("""\
            _subdirectory: t
            project_name:
              type: str
            """)
    )
    (template / "t" / "a.txt.jinja").write_text("{{ project_name }}\n")
    (template / "t" / "z.txt.jinja").write_text("{{ project_name | no_such_filter }}\n")
    monkeypatch.setattr(new_command, "locate_template", lambda: TemplateSource(template))
    out = tmp_path / "out"
    out.mkdir()

    result = run("new", str(out / "deep" / "billing"), "--defaults")

    assert result.exit_code == 1, result.output
    assert "rendering" in result.output and "no_such_filter" in result.output
    assert "Nothing was written" in result.output
    assert list(out.iterdir()) == []


def test_the_installed_version_is_named_while_the_answers_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Naming the version runs git in a checkout; that overlaps the answers' checks.
    checking = threading.Event()
    overlapped: list[bool] = []
    collect_answers = new_command.collect_answers
    shipped_provenance = new_command.shipped_provenance

    def collect(*args, **kwargs):
        checking.set()
        return collect_answers(*args, **kwargs)

    def provenance(source):
        overlapped.append(checking.wait(timeout=5))
        return shipped_provenance(source)

    monkeypatch.setattr(new_command, "collect_answers", collect)
    monkeypatch.setattr(new_command, "shipped_provenance", provenance)
    target = tmp_path / "billing"
    result = run("new", str(target), "--defaults")

    assert result.exit_code == 0, result.output
    assert overlapped == [True]
    assert answers_of(target)["_commit"] == locate_template().describe()


def test_a_template_version_that_cannot_be_named_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    asked: list[str] = []

    def provenance(source):
        time.sleep(0.2)  # still running when the answers are ready
        raise TemplateRepositoryError(source=str(source.path), reason="it holds no commit")

    monkeypatch.setattr(new_command, "shipped_provenance", provenance)
    monkeypatch.setattr(new_command, "terminal_is_interactive", lambda: True)
    monkeypatch.setattr(
        new_command, "_ask_on_terminal", lambda question, *_: asked.append(question.name)
    )
    result = run("new", str(tmp_path / "billing"))
    assert result.exit_code == 1
    assert "it holds no commit" in result.output
    # On a terminal nothing is asked before the version is known.
    assert asked == []
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(new_command, "terminal_is_interactive", lambda: False)
    result = run("new", str(tmp_path / "billing"), "--defaults")
    assert result.exit_code == 1
    assert "it holds no commit" in result.output
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(new_command, "render_project", interrupted)
    result = run("new", str(tmp_path / "billing"), "--defaults")
    assert result.exit_code == 130
    assert "Execution stopped by user" in result.output


# --- the terminal front end ------------------------------------------------

ENTER = "\r"
DOWN = "\x1b[B"
BACKSPACE = "\x7f"


def test_questions_are_asked_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Drive the real questionary prompts through a pipe, as keystrokes."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    monkeypatch.setattr(new_command, "terminal_is_interactive", lambda: True)
    keystrokes = [
        ENTER,  # project_name: accept the default, the directory's name
        ENTER,  # package_name: accept "inter"
        " and more" + ENTER,  # description: typed after the default
        ENTER,  # broker: the default choice
        ENTER,  # queue_namespace
        # lanes: a trailing comma is refused by the validator, the prompt stays;
        # erase it and accept.
        "," + ENTER + BACKSPACE + ENTER,
        DOWN + ENTER,  # result_backend: the second choice
        "y",  # http_api: yes
    ]
    target = tmp_path / "inter"
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text("".join(keystrokes))
        result = run("new", str(target))

    assert result.exit_code == 0, result.output
    answers = answers_of(target)
    assert answers["project_name"] == "inter"
    assert answers["description"] == "Background workers for inter and more"
    assert answers["lanes"] == "critical,default,batch"
    assert answers["result_backend"] == "redis"
    assert answers["http_api"] is True


def test_input_ending_at_a_prompt_is_an_error_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    monkeypatch.setattr(new_command, "terminal_is_interactive", lambda: True)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text(ENTER)  # project_name, then the input ends
        pipe.close()
        result = run("new", str(tmp_path / "billing"))

    assert result.exit_code == 1, result.output
    assert "input ended while asking for package_name" in result.output
    assert "--package" in result.output
    assert list(tmp_path.iterdir()) == []


def test_flags_are_not_asked_again_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    asked: list[str] = []

    def ask(question, default, validate):
        asked.append(question.name)
        return default

    monkeypatch.setattr(new_command, "terminal_is_interactive", lambda: True)
    monkeypatch.setattr(new_command, "_ask_on_terminal", ask)
    result = run("new", str(tmp_path / "billing"), "--package", "billing", "--lanes", "default")

    assert result.exit_code == 0, result.output
    assert asked == [
        "project_name",
        "description",
        "broker",
        "queue_namespace",
        "result_backend",
        "http_api",
    ]


# --- the command line itself -----------------------------------------------


def test_version_is_the_installed_one():
    # Printed from the package without reading its metadata, which says the same.
    from importlib.metadata import version

    result = run("--version")
    assert result.exit_code == 0
    assert result.output == f"workergen {version('workergen')}\n"


def test_the_console_script_prints_the_version_without_the_command_line():
    code = textwrap.dedent("""\
        import sys
        from workergen.entry import main
        main(["--version"])
        print("imported:", sorted(m for m in ("typer", "workergen.cli") if m in sys.modules),
              file=sys.stderr)
        """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout == run("--version").output
    assert "imported: []" in result.stderr


def test_help_lists_new_and_its_flags():
    result = run("new", "--help")
    assert result.exit_code == 0
    for flag in ("--name", "--package", "--namespace", "--defaults", "--data", "--force"):
        assert flag in result.output


def test_help_does_not_import_copier():
    code = textwrap.dedent("""\
        import sys
        from workergen.cli import app
        try:
            app(["--help"])
        except SystemExit:
            pass
        heavy = sorted(m for m in ("copier", "jinja2", "questionary", "yaml") if m in sys.modules)
        print("imported:", heavy, file=sys.stderr)
        """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "imported: []" in result.stderr


def test_the_rabbitmq_queue_type_is_asked_only_for_rabbitmq(tmp_path: Path):
    flags = ["--name", "q", "--package", "q", "--description", "d", "--namespace", "q"]
    flags += ["--lanes", "default", "--result-backend", "none", "--data", "http_api=false"]
    missing = run("new", str(tmp_path / "missing"), *flags, "--broker", "rabbitmq")
    assert missing.exit_code == 1
    assert "--data rabbitmq_queue_type=VALUE" in missing.output
    assert not (tmp_path / "missing").exists()

    quorum = run(
        "new",
        str(tmp_path / "quorum"),
        *flags,
        "--broker",
        "rabbitmq",
        "--data",
        "rabbitmq_queue_type=quorum",
    )
    assert quorum.exit_code == 0, quorum.output
    assert answers_of(tmp_path / "quorum")["rabbitmq_queue_type"] == "quorum"

    redis = run("new", str(tmp_path / "redis"), *flags, "--broker", "redis")
    assert redis.exit_code == 0, redis.output
    assert "rabbitmq_queue_type" not in answers_of(tmp_path / "redis")
