"""`queue provision` and the SQS settings, checked without any broker."""

import base64
import json
import re

import pytest
from bound import PACKAGE, only_on
from typer.testing import CliRunner

from workergen_runtime import project
from workergen_runtime.brokers.sqs.deadletters import moved_by_redrive
from workergen_runtime.cli.main import app
from workergen_runtime.config import build_config
from workergen_runtime.errors import ConfigurationError
from workergen_runtime.ops.provision import plan_document
from workergen_runtime.queues import dead_letter_queue, qualified_queue, sqs_queue_name
from workergen_runtime.settings import Settings

runner = CliRunner()
SQS_URL = "sqs://key:secret@127.0.0.1:4566"
sqs_only = only_on("sqs")


@sqs_only
def test_sqs_names_of_plain_namespaces_and_lanes_are_kombus_dots_become_dashes() -> None:
    assert sqs_queue_name("ventas.default.dlq") == "ventas-default-dlq"
    assert sqs_queue_name("ventas.high_priority") == "ventas-high_priority"


# Namespaces and lanes whose plain dash-joined names collide with one another.
TRICKY_NAMESPACES = ["", "a", "a-b", "a-b-c", "a_b", "a.b", "a-", "-a", "A", "x", "advs1"]
TRICKY_NAMESPACES += ["advs1-eu", "é", "a b"]
TRICKY_LANES = ["default", "b", "b-c", "c", "b_c", "eu-default", "default-dlq", "Hdefault", "d"]


@sqs_only
def test_sqs_names_never_put_two_namespace_lane_pairs_on_one_queue() -> None:
    names: dict[str, tuple[str, str, str]] = {}
    for namespace in TRICKY_NAMESPACES:
        for lane in TRICKY_LANES:
            for kind, logical in (
                ("queue", qualified_queue(lane, namespace)),
                ("dead-letter queue", dead_letter_queue(lane, namespace)),
            ):
                physical = sqs_queue_name(logical)
                assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", physical), physical
                assert names.setdefault(physical, (namespace, lane, kind)) == (
                    namespace,
                    lane,
                    kind,
                ), physical
    assert sqs_queue_name("advs1.eu-default") != sqs_queue_name("advs1-eu.default")
    assert len(names) == 2 * len(TRICKY_NAMESPACES) * len(TRICKY_LANES)


@sqs_only
def test_an_sqs_name_longer_than_sqs_allows_is_refused_with_a_hint() -> None:
    with pytest.raises(ConfigurationError, match="Shorten QUEUE_NAMESPACE"):
        sqs_queue_name(dead_letter_queue("default", "n" * 69))
    assert len(sqs_queue_name(dead_letter_queue("default", "n" * 68))) == 80


@sqs_only
def test_the_worker_and_producers_use_the_same_sqs_names_as_provision() -> None:
    from kombu.transport.SQS import CHARS_REPLACE_TABLE

    from workergen_runtime.brokers.sqs.transport import Channel

    logical = qualified_queue("default", "advs1-eu")
    assert Channel.entity_name(None, logical) == sqs_queue_name(logical) == "advs1Heu-default"
    # The SQS name passes kombu's own spelling unchanged: a foreign producer may use it.
    assert sqs_queue_name(logical).translate(CHARS_REPLACE_TABLE) == sqs_queue_name(logical)
    config = build_config(Settings(_env_file=None, broker_url=SQS_URL))
    assert config["broker_transport"] == "workergen_runtime.brokers.sqs.transport:Transport"


@sqs_only
def test_sqs_plan_has_a_dead_letter_queue_and_redrive_policy_per_lane() -> None:
    settings = Settings(
        _env_file=None, broker_url=SQS_URL, queue_namespace="ventas", task_max_deliveries=4
    )
    document = plan_document(settings)
    assert document["broker"] == "sqs"
    assert [q["lane"] for q in document["queues"]] == list(project.LANES)
    default = next(q for q in document["queues"] if q["lane"] == "default")
    assert default["queue"] == "ventas-default"
    assert default["redrive_policy"] == {
        "dead_letter_queue": "ventas-default-dlq",
        "maxReceiveCount": 4,
    }
    assert default["attributes"]["VisibilityTimeout"] == str(settings.visibility_timeout)


@sqs_only
def test_provision_json_touches_no_broker(monkeypatch) -> None:
    monkeypatch.setenv("BROKER_URL", SQS_URL)
    monkeypatch.setenv("QUEUE_NAMESPACE", "ventas")
    result = runner.invoke(app, ["queue", "provision", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["queues"][0]["queue"].startswith("ventas-")


@sqs_only
def test_sqs_worker_has_no_remote_control_nor_events() -> None:
    config = build_config(Settings(_env_file=None, broker_url=SQS_URL))
    assert config["worker_enable_remote_control"] is False
    assert config["worker_send_task_events"] is False
    options = config["broker_transport_options"]
    assert options["is_secure"] is False
    assert options["region"] == Settings(_env_file=None).sqs_region


@sqs_only
def test_sqs_worker_long_polls_and_looks_again_within_a_tenth_of_a_second() -> None:
    options = build_config(Settings(_env_file=None, broker_url=SQS_URL))["broker_transport_options"]
    # An idle lane: each receive waits on SQS's side, one request per wait.
    assert 0 < options["wait_time_seconds"] <= 20
    # A busy lane: kombu's 1 s default would hold it to prefetch x processes jobs a second.
    assert 0 < options["polling_interval"] <= 0.1


@sqs_only
def test_sqs_polling_follows_its_settings() -> None:
    settings = Settings(
        _env_file=None, broker_url=SQS_URL, sqs_wait_time_seconds=20, sqs_polling_interval=2
    )
    options = build_config(settings)["broker_transport_options"]
    assert (options["wait_time_seconds"], options["polling_interval"]) == (20, 2)


@sqs_only
def test_sqs_on_aws_uses_https() -> None:
    settings = Settings(_env_file=None, broker_url="sqs://", sqs_region="eu-west-3")
    assert settings.sqs_endpoint is None
    assert build_config(settings)["broker_transport_options"]["is_secure"] is True


@sqs_only
def test_a_message_moved_by_sqs_redrive_reads_back_as_a_replayable_dead_letter() -> None:
    body = base64.b64encode(json.dumps([["a"], {"n": 1}, {}]).encode()).decode()
    envelope = {
        "body": body,
        "content-type": "application/json",
        "content-encoding": "utf-8",
        "headers": {"id": "task-1", "task": f"{PACKAGE}.hello"},
        "properties": {"body_encoding": "base64"},
    }
    raw = base64.b64encode(json.dumps(envelope).encode()).decode()
    letter = moved_by_redrive({"MessageId": "m-1", "Body": raw}, "default", 5)
    assert letter.task_name == f"{PACKAGE}.hello"
    assert (letter.id, letter.lane) == ("task-1", "default")
    assert (letter.args, letter.kwargs, letter.attempts) == (["a"], {"n": 1}, 5)
    assert letter.reason == "delivery-limit"
    assert letter.replayable


@only_on("rabbitmq")
def test_provision_json_lists_the_lanes_dead_letter_policies_and_touches_no_broker(
    monkeypatch,
) -> None:
    monkeypatch.setenv("BROKER_URL", "amqp://guest:guest@127.0.0.1:9//")
    monkeypatch.setenv("QUEUE_NAMESPACE", "ventas")
    result = runner.invoke(app, ["queue", "provision", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert (document["broker"], document["queues"]) == ("amqp", [])
    assert all(policy["name"].startswith("ventas.") for policy in document["policies"])


@only_on("redis")
def test_provision_says_the_broker_needs_nothing(monkeypatch) -> None:
    monkeypatch.setenv("BROKER_URL", "redis://127.0.0.1:9/0")
    result = runner.invoke(app, ["queue", "provision"])
    assert result.exit_code == 0
    assert "nothing to create" in result.output
    document = json.loads(runner.invoke(app, ["queue", "provision", "--json"]).output)
    assert (document["broker"], document["queues"]) == ("redis", [])
