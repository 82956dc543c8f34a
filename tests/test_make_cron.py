"""`make:cron` through both entry points: schedules, files, and refusals that write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.scaffolding import ENTRY_POINTS, project_copy, run_make, snapshot


@pytest.fixture
def project(render, tmp_path: Path) -> Path:
    return project_copy(render(broker="redis"), tmp_path / "billing")


@pytest.fixture(params=ENTRY_POINTS)
def entry(request) -> str:
    return request.param


@pytest.mark.parametrize(
    ("schedule", "written"),
    [
        ("0 * * * *", 'schedule=cron("0 * * * *")'),
        ("  */5  1-6 * jan,jul mon-fri ", 'schedule=cron("*/5 1-6 * jan,jul mon-fri")'),
        ("every_minutes(10)", "schedule=every_minutes(minutes=10)"),
        ("hourly()", "schedule=hourly(minute=0)"),
        ('daily(at="02:00")', 'schedule=daily(at="02:00")'),
        ("weekly('fri', at='18:30')", 'schedule=weekly(day="fri", at="18:30")'),
        ("every_seconds(30)", "schedule=every_seconds(seconds=30)"),
    ],
)
def test_make_cron_writes_the_cron_with_its_schedule(entry: str, project: Path, schedule, written):
    result = run_make(entry, project, "make:cron", "PurgeSessions", "--schedule", schedule)

    assert result.exit_code == 0, result.output
    assert "created billing/crons/purge_sessions.py" in result.output
    assert "created tests/crons/test_purge_sessions.py" in result.output
    source = (project / "billing/crons/purge_sessions.py").read_text()
    assert 'name="billing.crons.purge_sessions",' in source
    assert f"    {written},\n" in source
    assert "without_overlapping=True," in source
    assert "class PurgeSessionsCron:" in source


def test_queue_gives_the_cron_its_own_lane(entry: str, project: Path):
    args = ("Tidy", "--schedule", "0 * * * *", "--queue", "maint", "--add-lane")
    result = run_make(entry, project, "make:cron", *args)

    assert result.exit_code == 0, result.output
    assert 'queue="maint",' in (project / "billing/crons/tidy.py").read_text()
    assert "lanes: critical,default,batch,maint" in (project / ".copier-answers.yml").read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("x", "--schedule", "61 * * * *"), "minute field: 61 is out of range 0-59"),
        (("x", "--schedule", "* 24 * * *"), "hour field: 24 is out of range 0-23"),
        (("x", "--schedule", "* * 0 * *"), "day-of-month field: 0 is out of range 1-31"),
        (("x", "--schedule", "* * * 13 *"), "month field: 13 is out of range 1-12"),
        (("x", "--schedule", "* * * * funday"), "day-of-week field: 'funday' is not a number"),
        (("x", "--schedule", "*/0 * * * *"), "minute field: step '0'"),
        (("x", "--schedule", "* * *"), "has 3 fields; a crontab expression has five"),
        (("x", "--schedule", "fortnightly()"), "unknown schedule helper fortnightly()"),
        (("x", "--schedule", 'daily(at="25:00")'), "is not a time of day"),
        (("x", "--schedule", "every_minutes(0)"), "minutes must be a positive whole number"),
        (("x", "--schedule", "every_minutes(minutes=1, extra=2)"), "every_minutes() takes"),
        (("x", "--schedule", ""), "a cron needs a schedule"),
        (("core", "--schedule", "* * * * *"), "is reserved"),
        (("../x", "--schedule", "* * * * *"), "leaves the crons/ folder"),
        (("x", "--schedule", "* * * * *", "--queue", "nope"), "unknown lane 'nope'"),
        (("x", "--schedule", "0 0 31 2 *"), "day-of-month '31' never occurs in month '2'"),
        (("x", "--schedule", "0 0 30 feb *"), "never occurs in month 'feb'"),
        (("x", "--schedule", "0 0 31 4 *"), "never occurs"),
        (("x", "--schedule", "0 0 31 apr,jun *"), "never occurs"),
        (("x", "--schedule", "5/20 * * * *"), "a step needs a range or '*'"),
        (("x", "--schedule", "٣ * * * *"), "is not a number"),
        (("x", "--schedule", "weekly(day=True)"), "is not a day of the week"),
        (("x", "--schedule", "hourly(True)"), "minute must be"),
        (("x", "--schedule", "every_seconds(10**9)"), "takes plain values"),
        (("x", "--schedule", "daily(*['02:00'])"), "takes plain values"),
        (("x", "--schedule", "* * * * *", "--queue", "a\nb", "--add-lane"), "cannot be a lane"),
    ],
)
def test_refusals_exit_1_and_write_nothing(entry: str, project: Path, args, says):
    before = snapshot(project)

    result = run_make(entry, project, "make:cron", *args)

    assert result.exit_code == 1, result.output
    assert says in result.output
    assert "Traceback" not in result.output
    assert snapshot(project) == before


def test_an_existing_cron_is_a_conflict_without_force(entry: str, project: Path):
    assert run_make(entry, project, "make:cron", "x", "--schedule", "* * * * *").exit_code == 0
    before = snapshot(project)

    result = run_make(entry, project, "make:cron", "x", "--schedule", "0 * * * *")

    assert result.exit_code == 1
    assert "conflict billing/crons/x.py" in result.output
    assert snapshot(project) == before
    forced = run_make(entry, project, "make:cron", "x", "--schedule", "0 * * * *", "--force")
    assert forced.exit_code == 0, forced.output
    assert "overwrite billing/crons/x.py" in forced.output


def test_outside_a_project_it_says_so(entry: str, project: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = run_make(entry, project, "make:cron", "x", "--schedule", "* * * * *", cwd=elsewhere)

    assert result.exit_code == 1
    assert "is not inside a project generated by workergen" in result.output
    assert list(elsewhere.iterdir()) == []


INJECTION = 'weekly(day="mon\\"+str(__import__(\\"os\\").system(\\"touch pwned\\"))+\\"")'


def test_a_schedule_that_smuggles_code_is_refused(entry: str, project: Path):
    before = snapshot(project)

    result = run_make(entry, project, "make:cron", "I", "--schedule", INJECTION)

    assert result.exit_code == 1, result.output
    assert "is not a day of the week" in result.output
    assert "Traceback" not in result.output
    assert snapshot(project) == before
    assert not (project / "pwned").exists()


def test_the_schedule_is_written_from_its_parse(entry: str, project: Path):
    typed = "weekly(day='Friday', at='7:05')"
    result = run_make(entry, project, "make:cron", "x", "--schedule", typed)

    assert result.exit_code == 0, result.output
    source = (project / "billing/crons/x.py").read_text()
    assert '    schedule=weekly(day="fri", at="07:05"),\n' in source
