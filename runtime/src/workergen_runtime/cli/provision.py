"""`queue provision`: create the queues a broker needs, or print them as JSON."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def queue_provision(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the queues, attributes and redrive policies as JSON; touch nothing.",
        ),
    ] = False,
) -> None:
    """Create every lane queue and its dead-letter queue (SQS), or set the lanes'
    dead-letter policies (RabbitMQ); idempotent."""
    from workergen_runtime.ops.provision import NOTHING_TO_PROVISION, plan_document, provision_sqs
    from workergen_runtime.settings import get_settings

    settings = get_settings()
    if as_json:
        typer.echo(json.dumps(plan_document(settings), indent=2))
        return
    if settings.broker_kind == "amqp":
        from workergen_runtime.brokers.amqp.policies import apply_policies, lane_policies

        policies = lane_policies(settings)
        how = apply_policies(settings, policies)
        for policy in policies:
            typer.echo(f"policy {policy.name}  pattern={policy.pattern}  vhost={policy.vhost}")
        typer.echo(f"RabbitMQ dead-letter policies set with {how}.")
        return
    if settings.broker_kind != "sqs":
        kind = settings.broker_kind
        typer.echo(NOTHING_TO_PROVISION.get(kind, f"{kind}: nothing to create."))
        return
    for line in provision_sqs(settings):
        typer.echo(line)
    typer.echo("SQS queues ready.")
