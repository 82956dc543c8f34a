"""`make:job` through both entry points: files written, reports, and refusals that write nothing."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.releases import clone_repository
from support.scaffolding import (
    ENTRY_POINTS,
    PACKAGE,
    project_copy,
    run_make,
    run_workergen,
    snapshot,
)
from workergen_runtime.scaffold import STUBS_DIR as STUBS


@pytest.fixture
def project(render, tmp_path: Path) -> Path:
    return project_copy(render(broker="redis"), tmp_path / "billing")


@pytest.fixture(params=ENTRY_POINTS)
def entry(request) -> str:
    return request.param


def test_make_job_writes_the_job_and_its_test(entry: str, project: Path):
    result = run_make(entry, project, "make:job", "SendInvoice", "--queue", "critical")

    assert result.exit_code == 0, result.output
    assert "created billing/jobs/send_invoice.py" in result.output
    assert "created tests/jobs/test_send_invoice.py" in result.output
    source = (project / "billing/jobs/send_invoice.py").read_text()
    assert '@job(name="billing.send_invoice", queue="critical")' in source
    assert "class SendInvoiceJob:" in source
    assert "    def handle(self" in source
    test = (project / "tests/jobs/test_send_invoice.py").read_text()
    assert "from billing.jobs.send_invoice import SendInvoiceJob" in test


def test_make_job_runs_from_a_subfolder_of_the_project(entry: str, project: Path):
    result = run_make(entry, project, "make:job", "invoice", cwd=project / "billing" / "jobs")

    assert result.exit_code == 0, result.output
    assert (project / "billing/jobs/invoice.py").is_file()


def test_a_nested_name_makes_a_package(entry: str, project: Path):
    result = run_make(entry, project, "make:job", "billing/refund")

    assert result.exit_code == 0, result.output
    assert (project / "billing/jobs/billing/__init__.py").is_file()
    source = (project / "billing/jobs/billing/refund.py").read_text()
    assert '@job(name="billing.billing.refund", queue="default")' in source
    assert "class RefundJob:" in source
    assert (project / "tests/jobs/billing/test_refund.py").is_file()


def test_retry_and_idempotency_options_reach_the_decorator(entry: str, project: Path):
    result = run_make(
        entry,
        project,
        "make:job",
        "Charge",
        "--retry-for",
        "ConnectionError,TimeoutError,socket.gaierror",
        "--max-retries",
        "4",
        "--backoff",
        "3",
        "--idempotent",
    )

    assert result.exit_code == 0, result.output
    source = (project / "billing/jobs/charge.py").read_text()
    assert "import socket\n" in source
    assert "retry_for=(ConnectionError, TimeoutError, socket.gaierror)," in source
    assert "max_retries=4," in source
    assert "backoff=3," in source
    assert "idempotent=True," in source


def test_running_again_skips_identical_files(entry: str, project: Path):
    assert run_make(entry, project, "make:job", "invoice").exit_code == 0

    again = run_make(entry, project, "make:job", "InvoiceJob")

    assert again.exit_code == 0, again.output
    assert "skipped billing/jobs/invoice.py" in again.output
    assert "skipped tests/jobs/test_invoice.py" in again.output


def test_force_overwrites_a_changed_job(entry: str, project: Path):
    assert run_make(entry, project, "make:job", "invoice").exit_code == 0
    job = project / "billing/jobs/invoice.py"
    job.write_text("# changed\n")

    result = run_make(entry, project, "make:job", "invoice", "--force")

    assert result.exit_code == 0, result.output
    assert "overwrite billing/jobs/invoice.py" in result.output
    assert "skipped tests/jobs/test_invoice.py" in result.output
    assert "class InvoiceJob" in job.read_text()


def test_dry_run_reports_and_writes_nothing(entry: str, project: Path):
    before = snapshot(project)

    result = run_make(entry, project, "make:job", "billing/refund", "--dry-run")

    assert result.exit_code == 0, result.output
    assert "created billing/jobs/billing/refund.py" in result.output
    assert "nothing was written" in result.output
    assert snapshot(project) == before


def test_add_lane_updates_the_answer_and_the_lanes_together(entry: str, project: Path):
    answers_before = yaml.safe_load((project / ".copier-answers.yml").read_text())

    result = run_make(entry, project, "make:job", "Mail", "--queue", "emails", "--add-lane")

    assert result.exit_code == 0, result.output
    assert "updated .copier-answers.yml" in result.output
    answers = (project / ".copier-answers.yml").read_text()
    assert "lanes: critical,default,batch,emails" in answers
    assert yaml.safe_load(answers) == {**answers_before, "lanes": "critical,default,batch,emails"}
    assert (
        'LANES: tuple[str, ...] = ("critical", "default", "batch", "emails")\n'
        in (project / "billing/project.py").read_text()
    )
    lanes = subprocess.run(
        [sys.executable, "-m", PACKAGE, "queue", "lanes"],
        cwd=project,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert lanes.returncode == 0, lanes.stderr
    assert "emails" in lanes.stdout


# Every template-owned file that lists the lanes.
LANE_FILES = (
    "README.md",
    "billing/project.py",
    "deploy/compose.yaml",
    "deploy/kubernetes/keda.yaml",
    "deploy/kubernetes/workers.yaml",
    "deploy/prometheus/alerts.yml",
    "deploy/prometheus/prometheus.yml",
)


def test_add_lane_gives_the_files_of_a_project_made_with_the_lane(entry: str, tmp_path: Path):
    # A clone: the template version the projects record is one its history holds.
    clone = clone_repository(tmp_path / "workergen")

    def new(where: str, *answers: str) -> Path:
        project = tmp_path / where / "billing"
        args = ["new", str(project), "--defaults", "--template", str(clone), "--vcs-ref", "HEAD"]
        args += answers
        result = run_workergen(args)
        assert result.exit_code == 0, result.output
        return project

    with_lane = new("from-the-start", "--lanes", "critical,default,batch,emails")
    added = new("added")

    result = run_make(entry, added, "make:job", "Refund", "--queue", "emails", "--add-lane")

    assert result.exit_code == 0, result.output
    for path in (".copier-answers.yml", *LANE_FILES):
        assert f"updated {path}" in result.output
    job_files = {"billing/jobs/refund.py", "tests/jobs/test_refund.py"}
    after = snapshot(added)
    assert set(after) - set(snapshot(with_lane)) == job_files
    assert {path: text for path, text in after.items() if path not in job_files} == snapshot(
        with_lane
    )
    with contextlib.chdir(added):
        shown = run_workergen(["diff", "--template", str(clone)])
    assert shown.exit_code == 0, shown.output
    assert "No differences from template" in shown.output


def test_add_lane_keeps_the_users_edits_to_the_files_it_changes(entry: str, project: Path):
    readme, compose = project / "README.md", project / "deploy/compose.yaml"
    readme.write_text(readme.read_text() + "\n## Our runbook\n\nPage the billing team.\n")
    compose.write_text("# Staging only.\n" + compose.read_text())

    result = run_make(entry, project, "make:job", "Refund", "--queue", "emails", "--add-lane")

    assert result.exit_code == 0, result.output
    assert readme.read_text().endswith("## Our runbook\n\nPage the billing team.\n")
    assert "- `batch`\n- `emails`\n" in readme.read_text()
    assert compose.read_text().startswith("# Staging only.\n")
    assert "  worker-emails:\n" in compose.read_text()
    assert '"--queue", "emails"' in compose.read_text()


def test_add_lane_refuses_when_an_edit_overlaps_the_lanes(entry: str, project: Path):
    readme = project / "README.md"
    readme.write_text(readme.read_text().replace("- `batch`\n", "- `batch` (nightly exports)\n"))
    before = snapshot(project)

    result = run_make(entry, project, "make:job", "Refund", "--queue", "emails", "--add-lane")

    assert result.exit_code == 1, result.output
    assert "the new lanes answer changes README.md where you edited it" in result.output
    assert "nothing was written" in result.output
    assert "Traceback" not in result.output
    assert snapshot(project) == before


def test_add_lane_dry_run_lists_every_file_and_writes_nothing(entry: str, project: Path):
    before = snapshot(project)

    result = run_make(
        entry, project, "make:job", "Refund", "--queue", "emails", "--add-lane", "--dry-run"
    )

    assert result.exit_code == 0, result.output
    for path in LANE_FILES:
        assert f"updated {path}" in result.output
    assert "nothing was written" in result.output
    assert snapshot(project) == before


def test_both_entry_points_write_the_same_bytes(render, tmp_path: Path):
    rendered = render(broker="redis")
    commands = [
        ("make:job", "SendInvoice", "--queue", "batch", "--retry-for", "ConnectionError"),
        ("make:job", "billing/refund", "--idempotent", "--max-retries", "2", "--backoff", "5"),
        ("make:job", "Notify", "--queue", "emails", "--add-lane"),
        ("make:cron", "PurgeSessions", "--schedule", "*/5 * * * *"),
        ("make:cron", "reports/nightly", "--schedule", 'daily(at="02:00")', "--queue", "batch"),
    ]
    trees = {}
    for entry in ENTRY_POINTS:
        project = project_copy(rendered, tmp_path / entry)
        for command in commands:
            result = run_make(entry, project, *command)
            assert result.exit_code == 0, (entry, command, result.output)
        trees[entry] = snapshot(project)

    assert trees["workergen"] == trees["project"]
    assert "billing/crons/reports/nightly.py" in trees["project"]


def test_a_local_stub_overrides_the_template_stub(entry: str, project: Path):
    stub = STUBS / "job.py.tmpl"
    (project / "stubs").mkdir()
    (project / "stubs/job.py.tmpl").write_text("# house style\n" + stub.read_text())

    result = run_make(entry, project, "make:job", "invoice")

    assert result.exit_code == 0, result.output
    assert (project / "billing/jobs/invoice.py").read_text().startswith("# house style\n")


LONG_LANE = "exports-to-the-data-warehouse-every-night"


def test_generated_files_lint_clean_and_their_tests_pass(render, tmp_path: Path):
    project = project_copy(render(broker="redis"), tmp_path / "billing")
    for command in [
        ("make:job", "SendInvoice", "--retry-for", "ConnectionError,socket.timeout"),
        ("make:job", "billing/refund", "--idempotent", "--max-retries", "2"),
        ("make:job", "ReconcileLedgerWithBank", "--retry-for", "ConnectionError,TimeoutError"),
        ("make:job", "Notify", "--queue", "emails", "--add-lane"),
        ("make:job", "Export", "--queue", LONG_LANE, "--add-lane"),
        ("make:job", "Pay", "--retry-for", "workergen_runtime.errors.QueueUnavailableError"),
        ("make:cron", "PurgeSessions", "--schedule", "*/5 * * * *"),
        ("make:cron", "reports/weekly", "--schedule", 'weekly("fri", at="18:30")'),
        ("make:cron", "Quarterly", "--schedule", "0 6 1 jan,apr,jul,oct *"),
        ("make:cron", "Tidy", "--schedule", "every_minutes(10)", "--queue", "maint", "--add-lane"),
    ]:
        result = run_make("project", project, *command)
        assert result.exit_code == 0, (command, result.output)

    env = {"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"}
    for check in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        linted = subprocess.run(
            [sys.executable, "-m", *check], cwd=project, capture_output=True, text=True
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr
    tested = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/jobs",
            "tests/crons",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "26 passed" in tested.stdout  # 2 per generated file + hello's 2 + greetings' 4
    lanes = (project / "billing/project.py").read_text()
    assert f'    "{LONG_LANE}",\n    "maint",\n)\n' in lanes, lanes  # too long for one line


# --- refusals: exit 1, a message that says what to do, and no file touched ---


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("class",), "is a Python keyword"),
        (("core",), "is reserved"),
        (("tests",), "is reserved"),
        (("celery",), "is reserved"),
        (("../evil",), "leaves the jobs/ folder"),
        (("billing/../../evil",), "leaves the jobs/ folder"),
        (("/tmp/evil",), "absolute path"),
        (("a//b",), "empty segment"),
        (("9lives",), "valid module name"),
        (("AVeryLongJobNameThatWouldPushItsTestPastTheLineLimitOfTheProject",), "is too long"),
        (("hello",), "already exist with other content"),
        (("invoice", "--queue", "nope"), "unknown lane 'nope'; the project's lanes are: critical"),
        (("invoice", "--queue", "Bad Lane", "--add-lane"), "cannot be a lane"),
        (("invoice", "--queue", "x-dlq", "--add-lane"), "cannot be a lane"),
        # The lane rule of the questions: no lane named after a transport's own key.
        (("invoice", "--queue", "unacked", "--add-lane"), "'unacked' is reserved"),
        (("invoice", "--retry-for", "NotAnError"), "is not a built-in exception"),
        (("invoice", "--retry-for", "os.path/x"), "is not an exception name"),
        (("invoice", "--retry-for", "os.nope"), "'os.nope' is not an exception class of os"),
        (("invoice", "--retry-for", "os.getcwd"), "'os.getcwd' is not an exception class of os"),
        (("invoice", "--retry-for", "nosuchmod.Error"), "cannot import nosuchmod"),
        (("invoice", "--retry-for", "ConnectionError,os.nope"), "'os.nope' is not"),
        (("invoice", "--retry-for", "os.class.Error"), "is not an exception name"),
        (("invoice", "--retry-for", "log.Error"), "would be hidden"),
        (("invoice", "--queue", "newlane\n", "--add-lane"), "'newlane\\n' cannot be a lane"),
        (("invoice", "--queue", "new\nlane", "--add-lane"), "cannot be a lane"),
        (("invoice", "--queue", 'x")\nimport os\n("', "--add-lane"), "cannot be a lane"),
    ],
)
def test_refusals_exit_1_and_write_nothing(entry: str, project: Path, args, says):
    before = snapshot(project)

    result = run_make(entry, project, "make:job", *args)

    assert result.exit_code == 1, result.output
    assert says in result.output
    assert "Traceback" not in result.output
    assert snapshot(project) == before


def test_a_conflict_writes_none_of_the_files(entry: str, project: Path):
    # The test file would be new, but the job exists: the whole request is refused.
    (project / "billing/jobs/invoice.py").write_text("# mine\n")
    before = snapshot(project)

    result = run_make(entry, project, "make:job", "invoice")

    assert result.exit_code == 1
    assert "conflict billing/jobs/invoice.py" in result.output
    assert "--force" in result.output
    assert snapshot(project) == before


def test_a_module_in_the_way_of_a_nested_package_is_refused(entry: str, project: Path):
    (project / "billing/jobs/billing.py").write_text("# a module\n")
    before = snapshot(project)

    result = run_make(entry, project, "make:job", "billing/refund")

    assert result.exit_code == 1
    assert "billing/jobs/billing.py is a module" in result.output
    assert snapshot(project) == before


def test_outside_a_project_it_says_so(entry: str, project: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = run_make(entry, project, "make:job", "invoice", cwd=elsewhere)

    assert result.exit_code == 1
    assert "is not inside a project generated by workergen" in result.output
    assert "workergen new" in result.output
    assert list(elsewhere.iterdir()) == []


def test_workergen_asks_for_an_update_when_the_project_carries_its_own_core(project: Path):
    # A project made before the runtime library holds a copy of it in <package>/core/: a job
    # written for the runtime would import what that project does not have yet.
    (project / "billing/core").mkdir()
    (project / "billing/core/__init__.py").write_text("")
    before = snapshot(project)

    result = run_make("workergen", project, "make:job", "invoice")

    assert result.exit_code == 1
    assert "billing/core/" in result.output
    assert "workergen update" in result.output
    assert "python -m billing make:job" in result.output
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("command", "says"),
    [("make:job", "Transient errors to retry"), ("make:cron", "Crontab")],
)
def test_both_entry_points_offer_the_same_options(project: Path, command: str, says: str):
    shown = {entry: run_make(entry, project, command, "--help") for entry in ENTRY_POINTS}

    options = {}
    for entry, result in shown.items():
        assert result.exit_code == 0, result.output
        assert says in result.output
        options[entry] = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", result.output))
    assert options["workergen"] == options["project"]
    assert "--queue" in options["project"]


def test_workergen_help_outside_a_project_says_where_the_options_come_from(tmp_path: Path):
    result = run_make("workergen", tmp_path, "make:job", "--help")

    assert result.exit_code == 0, result.output
    assert "Usage: workergen make:job NAME [OPTIONS]" in result.output
    assert "inside a project" in result.output


def imported_while_making_a_job(project: Path, run: str, modules: tuple[str, ...]) -> str:
    """Run `run` (code that makes the job SendInvoice) in a fresh process; which of modules
    it imported, as a line `imported: [...]`, once the job file is there."""
    code = (
        "import runpy, sys\n"
        "try:\n"
        f"    {run}\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print('imported:', sorted(m for m in {modules!r} if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / PACKAGE / "jobs" / "send_invoice.py").is_file()
    return done.stderr


def test_python_m_make_job_imports_only_the_scaffolding(project: Path):
    # Writing a job needs neither Celery nor the settings: `python -m billing make:job` loads
    # the runtime's scaffolding alone, not its command line (which imports both).
    run = (
        f"sys.argv = ['{PACKAGE}', 'make:job', 'SendInvoice']; "
        f"runpy.run_module('{PACKAGE}', run_name='__main__', alter_sys=True)"
    )
    heavy = ("celery", "kombu", "pydantic_settings", "workergen_runtime.cli.main", "billing.app")
    assert "imported: []" in imported_while_making_a_job(project, run, heavy)


def test_workergen_make_job_loads_no_other_command(project: Path):
    # The console script runs make:* on its own: none of new, update, check or diff is loaded.
    run = "from workergen.entry import main; main(['make:job', 'SendInvoice'])"
    others = ("workergen.cli", "workergen.commands.new", "workergen.commands.check", "copier")
    assert "imported: []" in imported_while_making_a_job(project, run, others)
