"""Every package the code imports is declared where it is used, and the generated
projects' dependency ranges have one source: the runtime (runtime/pyproject.toml). A
generated project depends on the runtime alone, in a range that admits this checkout's
runtime; the root `project` extra and constraints/oldest.txt are held to the runtime's
ranges here. The libraries whose internals the runtime relies on are bounded at the next
minor CI has not run, and the environment the suite runs in holds releases inside those
ranges."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT_PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
RUNTIME_PROJECT = tomllib.loads((REPO_ROOT / "runtime" / "pyproject.toml").read_text())["project"]
RUNTIME = canonicalize_name(RUNTIME_PROJECT["name"])
RUNTIME_PACKAGE = REPO_ROOT / "runtime" / "src" / "workergen_runtime"
RUNTIME_EXTRAS = RUNTIME_PROJECT["optional-dependencies"]
OLDEST = REPO_ROOT / "constraints" / "oldest.txt"
PACKAGE = "billing"
# The answers of the render matrix's projects, so the renders are shared with it.
BROKER_ANSWERS = {
    "redis": {"broker": "redis"},
    "rabbitmq": {"broker": "rabbitmq", "rabbitmq_queue_type": "classic"},
    "sqs": {"broker": "sqs"},
}
# The HTTP front door adds dependencies of its own; one broker is enough to see them.
HTTP_ANSWERS = {"broker": "redis", "http_api": True}
# The runtime's extras a project's dependencies ask for, by its answers.
ASKED_EXTRAS = {"redis": set(), "rabbitmq": set(), "sqs": {"sqs"}, "http_api": {"http"}}
# Imported only inside the functions that run for an SQS broker: a project on
# another broker never imports them, and does not depend on them.
SQS_ONLY = {"boto3", "botocore"}
# The libraries whose internals the runtime subclasses or relies on: each
# range stops below the next minor release CI has not run on, and CI runs the
# lowest (constraints/oldest.txt) and the highest each allows.
BOUNDED = ["celery", "kombu", "amqp", "billiard", "redis", "boto3", "botocore", "pycurl"]
# Floors CI cannot run, and why (constraints/oldest.txt says so too).
UNPINNED_FLOORS = {
    "pycurl": "7.45.0 to 7.45.2 publish no wheels; building one needs libcurl's headers",
}


def runtime_version() -> Version:
    """The runtime of this checkout (its build reads the version from the same line)."""
    text = (RUNTIME_PACKAGE / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert found, f"no __version__ in {RUNTIME_PACKAGE / '__init__.py'}"
    return Version(found[1])


def imports(files: Iterable[Path]) -> tuple[set[str], set[str]]:
    """Top-level names of the absolute imports in these files: (module level, anywhere)."""
    module_level: set[str] = set()
    anywhere: set[str] = set()
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found = {name.partition(".")[0] for name in names}
            anywhere |= found
            if id(node) in top:
                module_level |= found
    return module_level, anywhere


def python_files(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.rglob("*.py") if "__pycache__" not in p.parts]


def third_party(modules: set[str], first_party: set[str]) -> set[str]:
    """The distributions that provide the imported modules (not the standard library's)."""
    # The runtime is installed editable from this checkout: its record lists a .pth
    # file, not its package, so importlib cannot tell which distribution provides it.
    provided_by = {**packages_distributions(), RUNTIME_PACKAGE.name: [RUNTIME]}
    found = set()
    for module in sorted(modules - set(sys.stdlib_module_names) - first_party):
        assert module in provided_by, f"no installed distribution provides {module!r}"
        found |= {canonicalize_name(name) for name in provided_by[module]}
    return found


def names(requirements: Iterable[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def runtime_requirements(extras: Iterable[str] = ()) -> list[str]:
    """The runtime's dependencies, with those of the given extras."""
    return [*RUNTIME_PROJECT["dependencies"], *(r for e in extras for r in RUNTIME_EXTRAS[e])]


def brought(requirements: Iterable[str]) -> set[str]:
    """The packages these requirements install: a requirement on the runtime brings the
    runtime's dependencies and those of the extras it asks for."""
    found = set()
    for line in requirements:
        requirement = Requirement(line)
        found.add(canonicalize_name(requirement.name))
        if canonicalize_name(requirement.name) == RUNTIME:
            found |= names(runtime_requirements(requirement.extras))
    return found


def project_table(project: Path) -> dict:
    return tomllib.loads((project / "pyproject.toml").read_text())["project"]


def rendered_dependencies(project: Path) -> tuple[list[str], list[str]]:
    """A generated project's (dependencies, dev extra)."""
    table = project_table(project)
    return table["dependencies"], table["optional-dependencies"]["dev"]


def optional_requirements(project: Path) -> list[str]:
    """The requirements of a generated project's extras other than dev (e.g. monitor)."""
    extras = project_table(project)["optional-dependencies"]
    return [line for extra, lines in extras.items() if extra != "dev" for line in lines]


def ranges(requirements: Iterable[str]) -> dict[str, tuple[str, frozenset[str]]]:
    """Name -> (version range, extras); a name listed twice has one range, and the
    extras of both."""
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        versions = str(requirement.specifier)
        seen = found.get(name, (versions, frozenset()))
        assert seen[0] == versions, f"{name}: {versions} in one place, {seen[0]} in another"
        found[name] = (versions, seen[1] | frozenset(requirement.extras))
    return found


def test_the_generator_tests_and_tools_import_only_what_the_root_declares() -> None:
    extras = ROOT_PROJECT["optional-dependencies"]
    runtime = names(ROOT_PROJECT["dependencies"])
    _, generator = imports(python_files(REPO_ROOT / "generator"))
    assert third_party(generator, {"workergen"}) - runtime == set()

    build_hooks = list(REPO_ROOT.glob("*.py"))
    scripts = python_files(REPO_ROOT / "scripts")
    _, tools = imports(
        [*python_files(REPO_ROOT / "tests", REPO_ROOT / "bench"), *build_hooks, *scripts]
    )
    declared = runtime | names(extras["project"]) | names(extras["dev"])
    # The benchmarks import each other's modules (bench/running.py); the tests
    # import the scripts (scripts/sync_validators.py) by their file names.
    benchmarks = {path.stem for path in (REPO_ROOT / "bench").glob("*.py")}
    first_party = {"workergen", "support", "conftest", *benchmarks}
    first_party |= {path.stem for path in scripts}
    assert third_party(tools, first_party) - declared == set()


def test_the_runtime_imports_only_what_it_declares() -> None:
    top, anywhere = imports(python_files(RUNTIME_PACKAGE))
    assert top & SQS_ONLY == set(), "boto3/botocore must be imported only on SQS's paths"
    # A package of an extra is imported only by the command that needs it, which
    # says how to install it.
    declared = names(runtime_requirements(RUNTIME_EXTRAS))
    assert third_party(anywhere, {RUNTIME_PACKAGE.name}) - declared == set()


@pytest.mark.parametrize("broker", [*BROKER_ANSWERS, "http_api"])
def test_a_generated_project_imports_only_what_it_declares(render, broker: str) -> None:
    answers = HTTP_ANSWERS if broker == "http_api" else BROKER_ANSWERS[broker]
    project = render(**answers, result_backend="none", queue_namespace="")
    dependencies, dev = rendered_dependencies(project)
    # What the runtime brings with the extras the project asks for is declared too;
    # a project on Redis or RabbitMQ does not ask for `sqs`, so never gets boto3.
    declared = brought(dependencies)
    assert (declared & SQS_ONLY != set()) == (broker == "sqs"), declared

    _, anywhere = imports(python_files(project / PACKAGE))
    optional = brought(optional_requirements(project))
    assert third_party(anywhere, {PACKAGE}) - optional - declared == set()

    _, tests = imports(python_files(project / "tests"))
    # The tests may import one another (tests.core.hostile_table): they are first party too.
    assert third_party(tests, {PACKAGE, "tests"}) - declared - names(dev) == set()


def test_a_generated_project_depends_on_the_runtime_alone_in_a_range_of_this_checkout(
    render,
) -> None:
    """The ranges of the libraries are the runtime's only: a project asks for the
    runtime's release series its template was made for, and for the extras of its
    answers; this checkout's runtime is in that series, so a project renders and
    installs against it before the runtime is published."""
    asked: dict[str, SpecifierSet] = {}
    for broker, answers in [*BROKER_ANSWERS.items(), ("http_api", HTTP_ANSWERS)]:
        project = render(**answers, result_backend="none", queue_namespace="")
        dependencies = ranges(rendered_dependencies(project)[0])
        assert set(dependencies) == {RUNTIME}, f"{broker}: {sorted(dependencies)}"
        versions, extras = dependencies[RUNTIME]
        assert extras == ASKED_EXTRAS[broker], f"{broker} asks for {sorted(extras)}"
        # monitor and gevent: the runtime's extras of the same names, no range of their own.
        for line in optional_requirements(project):
            requirement = Requirement(line)
            assert canonicalize_name(requirement.name) == RUNTIME, f"{broker}: {line}"
            assert requirement.extras <= set(RUNTIME_EXTRAS), f"{broker}: {line}"
            assert not requirement.specifier, f"{broker}: {line} has a range of its own"
        asked[broker] = SpecifierSet(versions)
    assert len(set(asked.values())) == 1, f"the runtime's range differs by answers: {asked}"
    (template_range,) = set(asked.values())
    version = runtime_version()
    assert template_range.contains(version), (
        f"projects ask for {RUNTIME}{template_range}, which does not admit this checkout's"
        f" runtime {version} (runtime/src/workergen_runtime/__init__.py)"
    )
    upper_bound(RUNTIME, template_range)
    # The generator is released with the runtime of its own version.
    (generator_needs,) = [r for r in ROOT_PROJECT["dependencies"] if names([r]) == {RUNTIME}]
    assert Requirement(generator_needs).specifier.contains(version), generator_needs


def test_the_root_project_extra_has_the_runtime_s_ranges() -> None:
    """The suite renders projects of every answer and runs them in its own environment:
    the root `project` extra asks for the runtime with every extra, and lists the
    runtime's ranges as they are (Flower and gevent, of `monitor` and `gevent`, are in
    the `dev` extra)."""
    root = ROOT_PROJECT["optional-dependencies"]
    runtime = ranges(runtime_requirements(RUNTIME_EXTRAS))
    dev = [line for line in root["dev"] if names([line]) <= set(runtime)]
    listed = ranges([*root["project"], *dev])
    assert listed.pop(RUNTIME) == ("", frozenset(RUNTIME_EXTRAS))
    assert listed == runtime


def oldest_pins() -> dict[str, str]:
    """Name -> the release constraints/oldest.txt pins."""
    pins = {}
    for line in OLDEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def runtime_range(name: str) -> SpecifierSet:
    """The runtime's range for `name` (with every extra): what a generated project gets."""
    runtime = ranges(runtime_requirements(RUNTIME_EXTRAS))
    return Requirement(f"{name}{runtime[name][0]}").specifier


def upper_bound(name: str, specifier: SpecifierSet) -> Version:
    """The one `<` bound of a range, which must stop at a minor release (X.Y, Y > 0)."""
    uppers = [Version(spec.version) for spec in specifier if spec.operator == "<"]
    advice = "bound it at the next untested minor (the one after the newest release CI runs)"
    assert len(uppers) == 1, f"{name}{specifier} has no upper bound: {advice}"
    (upper,) = uppers
    assert len(upper.release) == 2 and upper.minor > 0, (
        f"{name}{specifier} is bounded at a major release, not a minor: {advice}"
    )
    return upper


def test_the_runtime_libraries_are_bounded_at_a_minor_and_ci_pins_their_oldest_releases() -> None:
    pins = oldest_pins()
    project = ranges(runtime_requirements(RUNTIME_EXTRAS))
    for name in BOUNDED:
        specifier = runtime_range(name)
        assert {spec.operator for spec in specifier} <= {">=", "<", "!="}, (name, str(specifier))
        upper_bound(name, specifier)
        if name in UNPINNED_FLOORS:
            assert name not in pins, f"{name} is pinned in {OLDEST.name}, yet listed as unpinnable"
        else:
            assert name in pins, (
                f"{name} has no oldest release in {OLDEST.name}: pin its floor, or say in"
                " UNPINNED_FLOORS (and in that file) why CI cannot run it"
            )
    for name, version in pins.items():
        assert name in project, f"{OLDEST.name} pins {name}, which the runtime does not depend on"
        specifier = runtime_range(name)
        lowest = {Version(spec.version) for spec in specifier if spec.operator == ">="}
        assert lowest == {Version(version)}, f"{name}: {OLDEST.name} pins {version}, not {lowest}"


@pytest.mark.parametrize("name", BOUNDED)
def test_this_environment_runs_the_newest_or_the_oldest_minor_each_range_allows(name: str) -> None:
    """The suite's environment is what CI tests: a release outside a range means the
    range is wrong; a newer minor than the one installed that the range still allows
    is one nobody tested (CI installs the newest allowed, the oldest run the pins)."""
    installed = Version(installed_version(name))
    specifier = runtime_range(name)
    assert specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is installed, outside the runtime's range {name}{specifier}"
    )
    if Version(oldest_pins().get(name, "0")) == installed:
        return  # the oldest environment (scripts/test-oldest.sh)
    upper = upper_bound(name, specifier)
    tested = Version(f"{installed.major}.{installed.minor + 1}")
    assert upper == tested, (
        f"{name}{specifier} allows minor releases up to below {upper}, but the newest this"
        f" environment holds is {installed}: bound it at the next untested minor"
        f" ({name}<{tested}), or install the newest allowed"
        " (pip install --upgrade -e runtime -e '.[dev]') and run CI on it"
    )
