"""The secure defaults the template promises, asserted on the built configuration."""

import pickle

import pytest
from bound import PACKAGE
from kombu import Connection, Message
from kombu.exceptions import ContentDisallowed

from workergen_runtime import project
from workergen_runtime.celery_app import app
from workergen_runtime.config import build_config
from workergen_runtime.queues import qualified_queue
from workergen_runtime.settings import Settings


@pytest.fixture
def config() -> dict:
    return build_config(Settings(_env_file=None))


def test_json_only_for_tasks_and_results(config: dict) -> None:
    assert config["task_serializer"] == "json"
    assert config["result_serializer"] == "json"
    assert config["accept_content"] == ["json"]
    assert config["result_accept_content"] == ["json"]


def test_a_pickle_message_is_refused_before_it_is_decoded() -> None:
    # The consumer the worker reads tasks with, and the accept set it gets from the app.
    with Connection("memory://") as connection:
        consumer = app.amqp.TaskConsumer(connection, queues=[], auto_declare=False)

        def received(body: bytes, content_type: str) -> Message:
            return Message(
                body=body,
                content_type=content_type,
                content_encoding="binary",
                accept=consumer.accept,
                channel=connection.default_channel,
            )

        body = pickle.dumps({"task": f"{PACKAGE}.hello"})
        pickled = received(body, "application/x-python-serialize")
        with pytest.raises(ContentDisallowed):
            pickled.decode()
        assert received(b'{"task": 1}', "application/json").decode() == {"task": 1}


def test_the_app_uses_the_built_configuration() -> None:
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_acks_late is True


def test_late_ack_and_requeue_when_the_worker_dies(config: dict) -> None:
    assert config["task_acks_late"] is True
    assert config["task_reject_on_worker_lost"] is True


def test_prefetch_is_one_by_default(config: dict) -> None:
    assert config["worker_prefetch_multiplier"] == 1


def test_every_task_has_a_soft_limit_below_its_hard_limit(config: dict) -> None:
    assert 0 < config["task_soft_time_limit"] < config["task_time_limit"]


def test_worker_children_are_recycled(config: dict) -> None:
    assert config["worker_max_tasks_per_child"] > 0
    assert config["worker_max_memory_per_child"] > 0


def test_connection_retried_at_start_and_long_tasks_cancelled_on_loss(config: dict) -> None:
    assert config["broker_connection_retry_on_startup"] is True
    assert config["worker_cancel_long_running_tasks_on_connection_loss"] is True


def test_the_worker_leaves_the_root_logger_alone(config: dict) -> None:
    assert config["worker_hijack_root_logger"] is False


def test_lanes_are_explicit_queues_and_unknown_queues_are_not_created(config: dict) -> None:
    namespace = Settings(_env_file=None).queue_namespace
    names = [queue.name for queue in config["task_queues"]]
    assert names == [qualified_queue(lane, namespace) for lane in project.LANES]
    assert config["task_create_missing_queues"] is False


def test_namespace_prefixes_every_queue_and_exchange() -> None:
    config = build_config(Settings(_env_file=None, queue_namespace="ventas"))
    assert config["task_default_queue"] == "ventas.default"
    assert {q.name for q in config["task_queues"]} == {f"ventas.{lane}" for lane in project.LANES}
    assert config["control_exchange"] == "ventas.celery"
    assert config["event_exchange"] == "ventas.celeryev"


def test_empty_namespace_means_no_prefix() -> None:
    config = build_config(Settings(_env_file=None, queue_namespace=""))
    assert config["task_default_queue"] == "default"
    assert config["control_exchange"] == "celery"


def test_a_dispatch_gives_up_on_a_dead_result_backend_as_on_a_dead_broker() -> None:
    config = build_config(Settings(_env_file=None, result_backend_url="redis://localhost:6379/1"))
    retry_policy = config["result_backend_transport_options"]["retry_policy"]
    assert retry_policy == config["task_publish_retry_policy"]
    # A worker storing a result keeps retrying, with backoff, through a short outage.
    assert config["result_backend_always_retry"] is True
    assert config["result_backend_max_retries"] >= 5
