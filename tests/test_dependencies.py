"""Every package the code imports is declared where it is used, and the generated
projects' dependency ranges have one source: the template (the root `project` extra and
constraints/oldest.txt are held to it here). The libraries whose internals the core relies
on are bounded at the next minor CI has not run, and the environment the suite runs in
holds releases inside those ranges."""

from __future__ import annotations

import ast
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
# Imported only inside the functions that run for an SQS broker: a project on
# another broker never imports them, and does not depend on them.
SQS_ONLY = {"boto3", "botocore"}
# The libraries whose internals the generated core subclasses or relies on: each
# range stops below the next minor release CI has not run on, and CI runs the
# lowest (constraints/oldest.txt) and the highest each allows.
BOUNDED = ["celery", "kombu", "amqp", "billiard", "redis", "boto3", "botocore", "pycurl"]
# Floors CI cannot run, and why (constraints/oldest.txt says so too).
UNPINNED_FLOORS = {
    "pycurl": "7.45.0 to 7.45.2 publish no wheels; building one needs libcurl's headers",
}


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
    provided_by = packages_distributions()
    found = set()
    for module in sorted(modules - set(sys.stdlib_module_names) - first_party):
        assert module in provided_by, f"no installed distribution provides {module!r}"
        found |= {canonicalize_name(name) for name in provided_by[module]}
    return found


def names(requirements: Iterable[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def rendered_dependencies(project: Path) -> tuple[list[str], list[str]]:
    """A generated project's (dependencies, dev extra)."""
    table = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    return table["dependencies"], table["optional-dependencies"]["dev"]


def optional_extras(project: Path) -> set[str]:
    """The packages of a generated project's extras other than dev (e.g. monitor's Flower)."""
    extras = tomllib.loads((project / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return {name for extra, lines in extras.items() if extra != "dev" for name in names(lines)}


def ranges(requirements: Iterable[str]) -> dict[str, tuple[str, frozenset[str]]]:
    """Name -> (version range, extras)."""
    found = {}
    for line in requirements:
        requirement = Requirement(line)
        found[canonicalize_name(requirement.name)] = (
            str(requirement.specifier),
            frozenset(requirement.extras),
        )
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


@pytest.mark.parametrize("broker", [*BROKER_ANSWERS, "http_api"])
def test_a_generated_project_imports_only_what_it_declares(render, broker: str) -> None:
    answers = HTTP_ANSWERS if broker == "http_api" else BROKER_ANSWERS[broker]
    project = render(**answers, result_backend="none", queue_namespace="")
    dependencies, dev = rendered_dependencies(project)
    optional = set() if broker == "sqs" else SQS_ONLY
    # Imported only by the command that needs its extra, which says how to install it.
    optional |= optional_extras(project)

    top, anywhere = imports(python_files(project / PACKAGE))
    assert top & SQS_ONLY == set(), "boto3/botocore must be imported only on SQS's paths"
    assert third_party(anywhere, {PACKAGE}) - optional - names(dependencies) == set()

    _, tests = imports(python_files(project / "tests"))
    # The tests may import one another (tests.core.hostile_table): they are first party too.
    assert third_party(tests, {PACKAGE, "tests"}) - names(dependencies) - names(dev) == set()


def test_the_root_project_extra_has_the_generated_projects_ranges(render) -> None:
    merged: dict[str, tuple[str, frozenset[str]]] = {}
    for broker, answers in [*BROKER_ANSWERS.items(), ("http_api", HTTP_ANSWERS)]:
        project = render(**answers, result_backend="none", queue_namespace="")
        for name, (versions, extras) in ranges(rendered_dependencies(project)[0]).items():
            seen = merged.get(name, (versions, frozenset()))
            assert seen[0] == versions, f"{name}: {versions} on {broker}, {seen[0]} elsewhere"
            merged[name] = (versions, seen[1] | extras)
    assert ranges(ROOT_PROJECT["optional-dependencies"]["project"]) == merged


def oldest_pins() -> dict[str, str]:
    """Name -> the release constraints/oldest.txt pins."""
    pins = {}
    for line in OLDEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def project_range(name: str) -> SpecifierSet:
    """A generated project's range for `name` (the root `project` extra holds the template's)."""
    project = ranges(ROOT_PROJECT["optional-dependencies"]["project"])
    return Requirement(f"{name}{project[name][0]}").specifier


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
    project = ranges(ROOT_PROJECT["optional-dependencies"]["project"])
    for name in BOUNDED:
        specifier = project_range(name)
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
        assert name in project, f"{OLDEST.name} pins {name}, which projects do not depend on"
        specifier = project_range(name)
        lowest = {Version(spec.version) for spec in specifier if spec.operator == ">="}
        assert lowest == {Version(version)}, f"{name}: {OLDEST.name} pins {version}, not {lowest}"


@pytest.mark.parametrize("name", BOUNDED)
def test_this_environment_runs_the_newest_or_the_oldest_minor_each_range_allows(name: str) -> None:
    """The suite's environment is what CI tests: a release outside a range means the
    range is wrong; a newer minor than the one installed that the range still allows
    is one nobody tested (CI installs the newest allowed, the oldest run the pins)."""
    installed = Version(installed_version(name))
    specifier = project_range(name)
    assert specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is installed, outside the projects' range {name}{specifier}"
    )
    if Version(oldest_pins().get(name, "0")) == installed:
        return  # the oldest environment (scripts/test-oldest.sh)
    upper = upper_bound(name, specifier)
    tested = Version(f"{installed.major}.{installed.minor + 1}")
    assert upper == tested, (
        f"{name}{specifier} allows minor releases up to below {upper}, but the newest this"
        f" environment holds is {installed}: bound it at the next untested minor"
        f" ({name}<{tested}), or install the newest allowed"
        " (pip install --upgrade -e '.[dev]') and run CI on it"
    )
