"""A rendered SQS project end to end against a local SQS (moto in server mode)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from support.brokers import sqs_client
from support.faults import dead_letters, wait_for_dead_letters
from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
MAX_DELIVERIES = 3
LANES = ("critical", "default", "batch")

FAILING_JOBS = '''"""Jobs that fail: one raises while a flag file exists, one kills its worker."""

import os
from pathlib import Path

from workergen_runtime import job


@job(name="{package}.poison", queue="batch")
class PoisonJob:
    def handle(self, folder: str) -> str:
        with Path(folder, "poison-attempts").open("a") as attempts:
            attempts.write("x\\n")
        if Path(folder, "broken").exists():
            raise ValueError("this job is broken")
        Path(folder, "poison-fixed").write_text("ok")
        return "ok"


@job(name="{package}.crash")
class CrashJob:
    def handle(self, folder: str) -> None:
        with Path(folder, "crash-attempts").open("a") as attempts:
            attempts.write("x\\n")
        os._exit(1)
'''


@pytest.fixture
def project(render, sqs_url: str, tmp_path: Path) -> Project:
    rendered = render(broker="sqs", result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=sqs_url,
        QUEUE_NAMESPACE=unique_namespace("sqs"),
        # Short timeouts so SQS redelivers within seconds; the start-up check still holds.
        VISIBILITY_TIMEOUT="4",
        TASK_SOFT_TIME_LIMIT="2",
        TASK_TIME_LIMIT="3",
        # One message reserved per process: it cannot outwait the 4 s visibility timeout.
        LANE_PREFETCH='{"default": 1}',
        TASK_RETRY_BACKOFF="0",
        TASK_RETRY_BACKOFF_MAX="1",
        TASK_MAX_DELIVERIES=str(MAX_DELIVERIES),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    proj.add_probe_job()
    return proj


def namespace(project: Project) -> str:
    return project.env["QUEUE_NAMESPACE"]


def provision(project: Project) -> str:
    done = project.run("queue", "provision")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_provision_creates_queues_with_redrive_idempotently(project: Project, sqs_url: str) -> None:
    ns = namespace(project)
    first = provision(project)
    second = provision(project)
    assert first == second
    assert f"queue={ns}-default  dead-letter={ns}-default-dlq" in first
    client = sqs_client(sqs_url)
    for lane in LANES:
        url = client.get_queue_url(QueueName=f"{ns}-{lane}")["QueueUrl"]
        attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        policy = json.loads(attributes["RedrivePolicy"])
        assert policy["deadLetterTargetArn"].endswith(f":{ns}-{lane}-dlq")
        assert int(policy["maxReceiveCount"]) == MAX_DELIVERIES
        assert attributes["VisibilityTimeout"] == "4"
    names = client.list_queues(QueueNamePrefix=ns)["QueueUrls"]
    assert len(names) == 6


def test_provision_json_describes_the_queues_without_creating_them(
    project: Project, sqs_url: str
) -> None:
    ns = namespace(project)
    done = project.run("queue", "provision", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert {q["queue"] for q in plan["queues"]} == {f"{ns}-{lane}" for lane in LANES}
    assert all(q["redrive_policy"]["maxReceiveCount"] == MAX_DELIVERIES for q in plan["queues"])
    assert "QueueUrls" not in sqs_client(sqs_url).list_queues(QueueNamePrefix=ns)


def test_worker_refuses_queues_without_a_dead_letter_queue(project: Project) -> None:
    done = project.run("queue", "work", "--queue", "default", timeout=60)
    assert done.returncode == 1
    assert "queue provision" in done.stderr
    assert f"{namespace(project)}-default" in done.stderr


def test_worker_runs_jobs_on_default_and_named_lanes(project: Project, tmp_path: Path) -> None:
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    with project.worker("--queue", "default,batch", "--concurrency", "2"):
        project.dispatch_probes(done, [f"default-{i}" for i in range(3)])
        project.dispatch_probes(done, [f"batch-{i}" for i in range(3)], lane="batch")
        ran = wait_for_files(
            done, [f"default-{i}" for i in range(3)] + [f"batch-{i}" for i in range(3)]
        )
    assert len(ran) == 6


@pytest.fixture
def failing(project: Project) -> Project:
    (project.root / PACKAGE / "jobs" / "failing.py").write_text(
        FAILING_JOBS.format(package=PACKAGE)
    )
    provision(project)
    return project


def test_a_failing_job_is_dead_lettered_listed_shown_and_replayed_once_fixed(
    failing: Project, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    done.mkdir()
    (done / "broken").write_text("")
    dispatch = failing.python(
        f"from {PACKAGE}.jobs.failing import PoisonJob\nPoisonJob.dispatch({str(done)!r})\n"
    )
    assert dispatch.returncode == 0, dispatch.stderr
    with failing.worker("--queue", "batch", "--concurrency", "1") as worker:
        failing.dispatch_probes(done, ["healthy"], lane="batch")
        wait_for_files(done, ["healthy"])
        letters = wait_for_dead_letters(failing, 1, 120, worker)
        assert len(letters) == 1, worker.log()[-4000:]
        letter = letters[0]
        assert letter["task_name"] == f"{PACKAGE}.poison"
        assert letter["lane"] == "batch"
        assert letter["reason"] == "failed"
        assert "this job is broken" in letter["exception"]
        # A ValueError is not transient: one attempt, no retries, no redeliveries.
        assert (done / "poison-attempts").read_text().count("x") == 1

        shown = failing.run("dlq", "show", letter["id"])
        assert shown.returncode == 0, shown.stderr
        assert "ValueError: this job is broken" in shown.stdout

        (done / "broken").unlink()
        replayed = failing.run("dlq", "replay", letter["id"])
        assert replayed.returncode == 0, replayed.stderr
        wait_for_files(done, ["poison-fixed"])
    assert dead_letters(failing) == []


def test_a_job_that_crashes_its_worker_is_dead_lettered_after_max_deliveries(
    failing: Project, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    done.mkdir()
    dispatch = failing.python(
        f"from {PACKAGE}.jobs.failing import CrashJob\nCrashJob.dispatch({str(done)!r})\n"
    )
    assert dispatch.returncode == 0, dispatch.stderr
    with failing.worker("--queue", "default", "--concurrency", "1") as worker:
        letters = wait_for_dead_letters(failing, 1, 150, worker)
        failing.dispatch_probes(done, ["after-crash"])
        wait_for_files(done, ["after-crash"])
        log = worker.log()
    assert len(letters) == 1, log[-4000:]
    assert letters[0]["task_name"] == f"{PACKAGE}.crash"
    # The 3 s hard limit can come before the pool notices the dead process (it may
    # look again only 5 s later): still a lost process, never a time limit.
    assert letters[0]["reason"] == "delivery-limit", (letters[0], log[-6000:])
    assert letters[0]["attempts"] == MAX_DELIVERIES
    assert (done / "crash-attempts").read_text().count("x") == MAX_DELIVERIES


def test_a_message_sqs_moves_by_redrive_is_listed_replayed_and_purged(
    project: Project, tmp_path: Path, sqs_url: str
) -> None:
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    project.dispatch_probes(done, ["redriven", "purged"])
    client = sqs_client(sqs_url)
    url = client.get_queue_url(QueueName=f"{namespace(project)}-default")["QueueUrl"]
    # Received MAX_DELIVERIES times and never deleted, as when its worker host dies each time.
    for _ in range(MAX_DELIVERIES):
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        assert len(got.get("Messages", [])) == 2
    assert "Messages" not in client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)

    letters = {tuple(letter["args"])[1]: letter for letter in dead_letters(project)}
    assert set(letters) == {"redriven", "purged"}
    assert {letter["reason"] for letter in letters.values()} == {"delivery-limit"}
    assert {letter["lane"] for letter in letters.values()} == {"default"}

    replayed = project.run("dlq", "replay", letters["redriven"]["id"])
    assert replayed.returncode == 0, replayed.stderr
    with project.worker("--queue", "default"):
        wait_for_files(done, ["redriven"])
    purged = project.run("dlq", "purge", "--yes")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert dead_letters(project) == []
    assert not (done / "purged").exists()


def test_a_pickle_message_is_never_executed_and_is_dead_lettered(
    project: Project, tmp_path: Path
) -> None:
    provision(project)
    done = tmp_path / "done"
    done.mkdir()
    project.send_raw(f"{PACKAGE}.probe", [str(done), "pickled"], serializer="pickle")
    with project.worker("--queue", "default") as worker:
        project.dispatch_probes(done, ["json-after"])
        wait_for_files(done, ["json-after"])
        letters = wait_for_dead_letters(project, 1, 120, worker)
        log = worker.log()
    assert not (done / "pickled").exists()
    assert len(letters) == 1, log[-4000:]
    assert letters[0]["reason"] == "refused"
    assert letters[0]["content_type"] == "application/x-python-serialize"


LETTERS = int(os.environ.get("WORKERGEN_TEST_SQS_LETTERS", "2000"))


def test_dlq_list_and_purge_finish_on_thousands_of_letters(project: Project, sqs_url: str) -> None:
    provision(project)
    client = sqs_client(sqs_url)
    url = client.get_queue_url(QueueName=f"{namespace(project)}-default-dlq")["QueueUrl"]
    # A 1 s visibility timeout: a pass that relied on the queue's own timeout would
    # meet its first letters again long before it read the last one.
    client.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "1"})
    for start in range(0, LETTERS, 10):
        entries = [
            {
                "Id": str(n),
                "MessageBody": json.dumps(
                    {"body": "[[], {}, {}]", "headers": {"id": f"l-{n}", "task": "billing.probe"}}
                ),
            }
            for n in range(start, start + 10)
        ]
        assert not client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")

    started = time.monotonic()
    listed = project.run("dlq", "list", "--json", "--lane", "default", timeout=240)
    listing = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in listed.stdout.splitlines() if line.strip()]
    assert sorted(ids) == sorted(f"l-{n}" for n in range(LETTERS))
    # Released at the end of the pass: a second listing sees them all again.
    assert len(dead_letters(project, "--lane", "default")) == LETTERS

    purged = project.run("dlq", "purge", "--yes", timeout=240)
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert f"purged {LETTERS} dead letter(s)" in purged.stdout
    assert dead_letters(project) == []
    print(f"\n[sqs] dlq list of {LETTERS} letters: {listing:.1f} s")
