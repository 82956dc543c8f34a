"""make:job / make:cron planning and writing, without a broker."""

import ast
from pathlib import Path

import pytest
from bound import answer_independent

from workergen_runtime import project, scaffold
from workergen_runtime.naming import InvalidNameError, normalize_name
from workergen_runtime.scaffold import MakeRequest, ScaffoldError, make, python_literal

PACKAGE = project.PACKAGE
# Files written from stubs, the lanes given: no broker and no other answer.
pytestmark = answer_independent


@pytest.fixture
def root(tmp_path: Path) -> Path:
    answers = f"lanes: default,batch\npackage_name: {PACKAGE}\n"
    (tmp_path / ".copier-answers.yml").write_text(answers)
    (tmp_path / PACKAGE).mkdir()
    (tmp_path / PACKAGE / "project.py").write_text(
        'LANES: tuple[str, ...] = ("default", "batch")\n'
    )
    return tmp_path


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "typed", ["Invoice", "invoice", "InvoiceJob", "invoice-job", "invoice_job", " invoice "]
)
def test_every_spelling_gives_one_job(typed: str) -> None:
    name = normalize_name(typed)
    assert (name.module, name.class_name) == ("invoice", "InvoiceJob")


@pytest.mark.parametrize("typed", ["class", "core", "../x", "/x", "a//b", "9x"])
def test_bad_names_are_refused(typed: str) -> None:
    with pytest.raises(InvalidNameError):
        normalize_name(typed)


def test_make_job_writes_the_job_and_its_test(root: Path) -> None:
    before = files(root)
    lines = make(root, MakeRequest("job", "billing/refund"), package=PACKAGE, lanes=("default",))

    assert lines == [
        f"created {PACKAGE}/jobs/billing/__init__.py",
        f"created {PACKAGE}/jobs/billing/refund.py",
        "created tests/jobs/billing/test_refund.py",
    ]
    source = (root / PACKAGE / "jobs/billing/refund.py").read_text()
    assert f'@job(name="{PACKAGE}.billing.refund", queue="default")' in source
    assert "class RefundJob:" in source
    assert files(root) - before == {line.split(" ", 1)[1] for line in lines}


def test_a_second_run_skips_and_a_changed_file_conflicts(root: Path) -> None:
    make(root, MakeRequest("job", "invoice"), package=PACKAGE, lanes=("default",))
    again = make(root, MakeRequest("job", "invoice"), package=PACKAGE, lanes=("default",))
    assert again == [f"skipped {PACKAGE}/jobs/invoice.py", "skipped tests/jobs/test_invoice.py"]

    (root / PACKAGE / "jobs/invoice.py").write_text("# mine\n")
    with pytest.raises(ScaffoldError) as refused:
        make(root, MakeRequest("job", "invoice"), package=PACKAGE, lanes=("default",))
    assert f"conflict {PACKAGE}/jobs/invoice.py" in refused.value.report
    assert (root / PACKAGE / "jobs/invoice.py").read_text() == "# mine\n"


def test_dry_run_writes_nothing(root: Path) -> None:
    before = files(root)
    lines = make(root, MakeRequest("job", "x", dry_run=True), package=PACKAGE, lanes=("default",))
    assert lines[-1] == "dry run: nothing was written"
    assert files(root) == before


def test_add_lane_writes_the_answer_and_every_file_rendered_from_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[dict] = []

    def render(where: Path, answers: dict) -> list[tuple[str, str]]:
        # What workergen renders from the template: here, a README listing the lanes.
        asked.append(answers)
        return [("README.md", "".join(f"- {lane}\n" for lane in answers["lanes"].split(",")))]

    monkeypatch.setattr(scaffold, "answer_renderer", render)
    request = MakeRequest("job", "mail", queue="emails", add_lane=True)
    lines = make(root, request, package=PACKAGE, lanes=("default", "batch"))

    assert asked == [{"lanes": "default,batch,emails", "package_name": PACKAGE}]
    assert "lanes: default,batch,emails" in (root / ".copier-answers.yml").read_text()
    assert (root / "README.md").read_text() == "- default\n- batch\n- emails\n"
    assert lines[-2:] == ["updated .copier-answers.yml", "updated README.md"]


def test_add_lane_without_workergen_is_refused_and_writes_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The project holds no template: a lane goes into README.md, deploy/, ... through workergen.
    monkeypatch.setattr(scaffold, "answer_renderer", None)
    monkeypatch.setattr(scaffold.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(root / "no-such-dir"))
    before = {path: (root / path).read_bytes() for path in files(root)}

    request = MakeRequest("job", "mail", queue="emails", add_lane=True)
    with pytest.raises(ScaffoldError, match="needs workergen"):
        make(root, request, package=PACKAGE, lanes=("default", "batch"))

    assert {path: (root / path).read_bytes() for path in files(root)} == before


def test_an_unknown_lane_lists_the_lanes(root: Path) -> None:
    with pytest.raises(ScaffoldError, match="the project's lanes are: default"):
        make(root, MakeRequest("job", "x", queue="nope"), package=PACKAGE, lanes=("default",))


def test_make_cron_renders_the_schedule(root: Path) -> None:
    request = MakeRequest("cron", "PurgeSessions", schedule='daily(at="02:00")')
    make(root, request, package=PACKAGE, lanes=("default",))

    source = (root / PACKAGE / "crons/purge_sessions.py").read_text()
    assert "from workergen_runtime.scheduling.schedules import daily" in source
    assert 'schedule=daily(at="02:00"),' in source
    assert "without_overlapping=True," in source


def test_a_local_stub_wins(root: Path) -> None:
    (root / "stubs").mkdir()
    (root / "stubs/job.py.tmpl").write_text('"""$class_name, our way."""\n')
    make(root, MakeRequest("job", "x"), package=PACKAGE, lanes=("default",))
    assert (root / PACKAGE / "jobs/x.py").read_text() == '"""XJob, our way."""\n'


@pytest.mark.parametrize("value", ["plain", "it's", 'say "hi"', "\\", "new\nline", "🚀", 0, 10**30])
def test_a_literal_reads_back_as_the_value(value: object) -> None:
    assert ast.literal_eval(python_literal(value)) == value


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (
            'weekly(day="mon\\"+str(__import__(\\"os\\").system(\\"true\\"))+\\"")',
            "day of the week",
        ),
        ("0 0 31 2 *", "never occurs"),
        ("daily(at=__import__('os').getcwd())", "plain values"),
    ],
)
def test_a_schedule_is_refused_unless_it_parses(root: Path, typed: str, says: str) -> None:
    with pytest.raises(ScaffoldError, match=says):
        make(root, MakeRequest("cron", "x", schedule=typed), package=PACKAGE, lanes=("default",))
    assert not (root / PACKAGE / "crons").exists()


@pytest.mark.parametrize("retry_for", ["os.nope", "os.getcwd", "nosuchmod.Error", "NotAnError"])
def test_retry_for_must_name_an_exception_class(root: Path, retry_for: str) -> None:
    with pytest.raises(ScaffoldError, match="retry-for"):
        make(
            root, MakeRequest("job", "x", retry_for=retry_for), package=PACKAGE, lanes=("default",)
        )
