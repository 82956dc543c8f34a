"""The private members of copier and Jinja the generator overrides, calls or replaces.

`workergen.copier_run` renders a new project with copier's own worker, minus
work a fresh render does not need; `workergen.jinja_cache` replaces `from_string`
on the Jinja environments copier and workergen render with. No public way does
either (docs/architecture.md, "Overrides of private members"). A release that
renames one of these members or changes its parameters fails here, in a row
that names it and what depends on it.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import copier._main
import copier._template
import copier._types
import copier._vcs
import jinja2
import pytest
from jinja2.bccache import Bucket, BytecodeCache, FileSystemBytecodeCache
from jinja2.sandbox import SandboxedEnvironment

from workergen.copier_run import fresh_render_class
from workergen.jinja_cache import compiled_template_cache, plain_template, reuse_compiled

Worker = copier._main.Worker
Template = copier._template.Template


def shape(function: Any) -> str:
    """Parameters without annotations or default values: `(self, name=, *, key=)`."""
    signature = inspect.signature(function)
    bare = [
        parameter.replace(
            annotation=parameter.empty,
            default=parameter.empty if parameter.default is parameter.empty else ...,
        )
        for parameter in signature.parameters.values()
    ]
    text = str(signature.replace(parameters=bare, return_annotation=signature.empty))
    return text.replace("=Ellipsis", "=")


# (owner, member, its parameters): copier's private members FreshRender overrides
# or calls, and the Jinja members jinja_cache calls on an environment and its cache.
METHODS = [
    pytest.param(
        Worker,
        "_render_template",
        "(self)",
        id="Worker._render_template: the render context built once per render",
    ),
    pytest.param(
        Worker,
        "_render_context",
        "(self)",
        id="Worker._render_context: each path part gets a copy of the frozen context",
    ),
    pytest.param(
        Worker,
        "_sync_git_index_executable_bit",
        "(self, dst_relpath, src_mode)",
        id="Worker._sync_git_index_executable_bit: a fresh render has no index to fix",
    ),
    pytest.param(
        Template,
        "_cleanup",
        "(self)",
        id="Template._cleanup: registered as copier registers its own template",
    ),
    pytest.param(
        copier._types.Phase,
        "current",
        "()",
        id="copier._types.Phase.current: a frozen context is for its own phase only",
    ),
    pytest.param(
        copier._types,
        "LazyDict",
        "(mapping=)",
        id="copier._types.LazyDict: the copied _copier_conf, read when asked",
    ),
    pytest.param(
        copier._vcs,
        "is_git_available",
        "()",
        id="copier._vcs.is_git_available: a template directory without the bundle check",
    ),
    pytest.param(
        copier._vcs,
        "is_git_repo_root",
        "(path)",
        id="copier._vcs.is_git_repo_root: a template directory without the bundle check",
    ),
    pytest.param(
        jinja2.Environment,
        "from_string",
        "(self, source, globals=, template_class=)",
        id="Environment.from_string: replaced on the environment, compiling once",
    ),
    pytest.param(
        jinja2.Environment,
        "preprocess",
        "(self, source, name=, filename=)",
        id="Environment.preprocess: extensions still see every source",
    ),
    pytest.param(
        jinja2.Environment,
        "compile",
        "(self, source, name=, filename=, raw=, defer_init=)",
        id="Environment.compile: a string's code kept in the bytecode cache",
    ),
    pytest.param(
        jinja2.Environment,
        "make_globals",
        "(self, d)",
        id="Environment.make_globals: the globals of a template made here",
    ),
    pytest.param(
        jinja2.Template,
        "from_module_dict",
        "(environment, module_dict, globals)",
        id="Template.from_module_dict: plain text rendered without compiling",
    ),
    pytest.param(
        jinja2.Template,
        "from_code",
        "(environment, code, globals, uptodate=)",
        id="Template.from_code: a cached string's template",
    ),
    pytest.param(
        BytecodeCache,
        "get_bucket",
        "(self, environment, name, filename, source)",
        id="BytecodeCache.get_bucket: a string's entry",
    ),
    pytest.param(
        BytecodeCache,
        "set_bucket",
        "(self, bucket)",
        id="BytecodeCache.set_bucket: a string's entry written",
    ),
    pytest.param(
        BytecodeCache,
        "get_cache_key",
        "(self, name, filename=)",
        id="BytecodeCache.get_cache_key: overridden, entries named by path, not place",
    ),
    pytest.param(
        FileSystemBytecodeCache,
        "__init__",
        "(self, directory=, pattern=)",
        id="FileSystemBytecodeCache: the user's cache directory",
    ),
    pytest.param(
        FileSystemBytecodeCache,
        "load_bytecode",
        "(self, bucket)",
        id="FileSystemBytecodeCache.load_bytecode: overridden, the shipped cache read too",
    ),
    pytest.param(
        FileSystemBytecodeCache,
        "dump_bytecode",
        "(self, bucket)",
        id="FileSystemBytecodeCache.dump_bytecode: overridden, a failed write ignored",
    ),
    pytest.param(Bucket, "load_bytecode", "(self, f)", id="Bucket.load_bytecode: an entry read"),
    pytest.param(Bucket, "reset", "(self)", id="Bucket.reset: a damaged entry compiled again"),
]


@pytest.mark.parametrize(("owner", "name", "parameters"), METHODS)
def test_the_member_is_there_with_the_parameters_relied_on(
    owner: Any, name: str, parameters: str
) -> None:
    member = getattr(owner, name, None)
    assert member is not None, f"{owner.__name__}.{name} is gone"
    assert shape(member) == parameters, f"{owner.__name__}.{name} changed"


@pytest.mark.parametrize(
    "name",
    ["_render_template", "_render_context", "_sync_git_index_executable_bit"],
)
def test_fresh_render_takes_every_call_copier_makes_to_its_own(name: str) -> None:
    ours = getattr(fresh_render_class(), name)
    theirs = inspect.signature(getattr(Worker, name)).parameters
    inspect.signature(ours).bind(*theirs)
    inspect.signature(ours).bind(**dict.fromkeys(theirs))


def test_copier_still_has_the_worker_fields_and_properties_fresh_render_uses() -> None:
    fields = inspect.signature(Worker).parameters
    used = ["src_path", "dst_path", "data", "vcs_ref", "settings", "defaults"]
    used += ["unsafe", "overwrite", "cleanup_on_error", "quiet", "pretend", "use_prereleases"]
    assert [name for name in used if name not in fields] == []
    # Overridden (jinja_env, template) or read (resolved_vcs_ref) as cached properties.
    for name in ("jinja_env", "template", "resolved_vcs_ref"):
        assert isinstance(inspect.getattr_static(Worker, name), property | type(Worker.template))
    # FreshRender registers its template's clean-up where copier registers its own.
    assert "self._cleanup_hooks.append(result._cleanup)" in inspect.getsource(Worker)
    assert "_frozen_context" not in fields and not hasattr(Worker, "_frozen_context")


def test_copier_still_builds_the_context_keys_fresh_render_copies() -> None:
    source = inspect.getsource(Worker._render_context)
    assert re.search(r"\b_copier_conf\b", source)
    assert re.search(r"\b_copier_phase\b", source)


def test_the_template_directory_still_has_the_fields_it_is_built_with() -> None:
    assert list(inspect.signature(Template).parameters) == ["url", "ref", "use_prereleases"]
    assert isinstance(inspect.getattr_static(Template, "vcs"), type(Worker.template))


def test_copiers_settings_model_still_takes_what_run_copy_converts() -> None:
    # copier_run._settings converts copier.Settings as run_copy does, when copier has the model.
    model = getattr(copier._main, "SettingsModel", None)
    if model is not None:
        assert {"defaults", "trust"} <= set(inspect.signature(model).parameters)


@pytest.mark.parametrize(
    "environment",
    [copier._main.SandboxedEnvironment, SandboxedEnvironment],
    ids=["copier's environment", "copier.yml's environment (workergen.answers)"],
)
def test_from_string_is_jinjas_own_plain_method_on_the_environments_replaced(
    environment: type,
) -> None:
    # Replaced on the instance, the replacement compiles through Jinja's own method:
    # a subclass of its own would be bypassed for plain text and cached strings.
    assert (
        inspect.getattr_static(environment, "from_string")
        is vars(jinja2.Environment)["from_string"]
    )
    env = reuse_compiled(environment())
    assert "from_string" in vars(env)
    assert env.from_string("{{ 1 + 1 }}").render() == "2"


def test_a_plain_template_is_made_from_the_keys_jinja_reads_of_a_compiled_module(
    tmp_path: Path,
) -> None:
    # plain_template hands from_module_dict the namespace a compiled template's module has.
    source = inspect.getsource(jinja2.Template._from_namespace)
    read = set(re.findall(r'= namespace\["(\w+)"\]', source))
    assert read == {"name", "__file__", "blocks", "root", "debug_info"}
    env = jinja2.Environment()
    assert plain_template(env, "plain text").render() == "plain text"
    cache = compiled_template_cache(env, shipped=tmp_path / "none")
    assert isinstance(cache, FileSystemBytecodeCache)
    assert cache.pattern == "%s.cache"
