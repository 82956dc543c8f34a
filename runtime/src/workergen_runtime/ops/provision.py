"""Queues a broker needs before workers start: the plan is pure, applying it talks to SQS.

On SQS every lane has a queue and a dead-letter queue; the lane queue's redrive
policy moves a message there once it has been received TASK_MAX_DELIVERIES
times. On RabbitMQ the workers declare the queues, and each lane gets the policy
that dead-letters its messages (policies.py). Redis needs nothing ahead of time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from workergen_runtime import project
from workergen_runtime.errors import ProjectError, QueueUnavailableError
from workergen_runtime.queues import dead_letter_queue, qualified_queue, sqs_queue_name
from workergen_runtime.settings import Settings

# Dead letters are kept as long as SQS allows (14 days) to leave time for a fix.
DEAD_LETTER_RETENTION = 14 * 24 * 3600

NOTHING_TO_PROVISION = {
    "redis": "Redis: nothing to create. Lanes are Redis lists made on first use, and the "
    "project records dead letters itself.",
}


@dataclass(frozen=True)
class LaneQueues:
    """A lane's SQS queue and dead-letter queue, with their attributes."""

    lane: str
    queue: str
    dead_letter_queue: str
    queue_attributes: dict[str, str] = field(default_factory=dict)
    dead_letter_attributes: dict[str, str] = field(default_factory=dict)
    max_receive_count: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "queue": self.queue,
            "attributes": self.queue_attributes,
            "redrive_policy": {
                "dead_letter_queue": self.dead_letter_queue,
                "maxReceiveCount": self.max_receive_count,
            },
            "dead_letter_queue": self.dead_letter_queue,
            "dead_letter_attributes": self.dead_letter_attributes,
        }


def sqs_plan(settings: Settings) -> list[LaneQueues]:
    """Every lane's queues under QUEUE_NAMESPACE, named as SQS will name them."""
    ns = settings.queue_namespace
    return [
        LaneQueues(
            lane=lane,
            queue=sqs_queue_name(qualified_queue(lane, ns)),
            dead_letter_queue=sqs_queue_name(dead_letter_queue(lane, ns)),
            queue_attributes={"VisibilityTimeout": str(settings.visibility_timeout)},
            dead_letter_attributes={"MessageRetentionPeriod": str(DEAD_LETTER_RETENTION)},
            max_receive_count=settings.task_max_deliveries,
        )
        for lane in project.LANES
    ]


def plan_document(settings: Settings) -> dict[str, Any]:
    """The plan as data, for infrastructure as code; touches no broker."""
    kind = settings.broker_kind
    document: dict[str, Any] = {"broker": kind, "namespace": settings.queue_namespace}
    if kind == "sqs":
        document["region"] = settings.sqs_region
        document["queues"] = [lane.as_dict() for lane in sqs_plan(settings)]
    elif kind == "amqp":
        from workergen_runtime.brokers.amqp.policies import lane_policies

        document["queues"] = []
        document["policies"] = [policy.as_dict() for policy in lane_policies(settings)]
        document["note"] = (
            "RabbitMQ: workers declare the lanes and dead-letter queues; each lane's "
            "dead-lettering comes from its policy."
        )
    else:
        document["queues"] = []
        document["note"] = NOTHING_TO_PROVISION.get(kind, f"{kind}: nothing to create.")
    return document


def sqs_client(settings: Settings) -> Any:
    """A boto3 SQS client for BROKER_URL: its keys if it has them, else the AWS chain."""
    import boto3

    parts = urlsplit(settings.effective_broker_url)
    options: dict[str, Any] = {"region_name": settings.sqs_region}
    if parts.username:
        options["aws_access_key_id"] = unquote(parts.username)
        options["aws_secret_access_key"] = unquote(parts.password or "")
    if settings.sqs_endpoint:
        options["endpoint_url"] = settings.sqs_endpoint
    return boto3.client("sqs", **options)


def provision_sqs(settings: Settings, client: Any = None) -> list[str]:
    """Create (or bring up to date) every lane queue and its dead-letter queue.

    Idempotent: an existing queue gets its attributes set to the plan's.
    Returns one line per queue saying what was done.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = client or sqs_client(settings)
    done = []
    try:
        for lane in sqs_plan(settings):
            dlq_url = _ensure_queue(client, lane.dead_letter_queue, lane.dead_letter_attributes)
            dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            redrive = json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(lane.max_receive_count)}
            )
            _ensure_queue(client, lane.queue, {**lane.queue_attributes, "RedrivePolicy": redrive})
            done.append(
                f"{lane.lane:<12} queue={lane.queue}  dead-letter={lane.dead_letter_queue}  "
                f"maxReceiveCount={lane.max_receive_count}"
            )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ProjectError(
            f"SQS refused to provision the queues: {error.get('Code')}: {error.get('Message')}. "
            "The credentials need sqs:CreateQueue, sqs:GetQueueUrl, sqs:GetQueueAttributes "
            "and sqs:SetQueueAttributes."
        ) from None
    except BotoCoreError as exc:
        raise QueueUnavailableError(
            f"Cannot reach SQS at {settings.sqs_endpoint or settings.sqs_region}: {exc}"
        ) from None
    return done


def missing_redrive(settings: Settings, client: Any = None) -> list[str]:
    """The lane queues that do not exist or have no redrive policy (empty when all is well)."""
    from botocore.exceptions import ClientError

    client = client or sqs_client(settings)
    missing = []
    for lane in sqs_plan(settings):
        try:
            url = client.get_queue_url(QueueName=lane.queue)["QueueUrl"]
            attributes = client.get_queue_attributes(
                QueueUrl=url, AttributeNames=["RedrivePolicy"]
            ).get("Attributes", {})
        except ClientError:
            missing.append(lane.queue)
            continue
        if "RedrivePolicy" not in attributes:
            missing.append(lane.queue)
    return missing


def require_provisioned(settings: Settings) -> None:
    """Refuse to start a worker on SQS lanes that would lose failed jobs."""
    from botocore.exceptions import BotoCoreError

    try:
        missing = missing_redrive(settings)
    except BotoCoreError as exc:
        raise QueueUnavailableError(
            f"Cannot reach SQS at {settings.sqs_endpoint or settings.sqs_region}: {exc}"
        ) from None
    if missing:
        raise ProjectError(
            f"These SQS queues are missing or have no dead-letter queue: {', '.join(missing)}. "
            "Create them with: queue provision (or apply the output of queue provision --json)."
        )


def _ensure_queue(client: Any, name: str, attributes: dict[str, str]) -> str:
    from botocore.exceptions import ClientError

    try:
        url = client.get_queue_url(QueueName=name)["QueueUrl"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in (
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueDoesNotExist",
        ):
            raise
        return client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    client.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    return url
