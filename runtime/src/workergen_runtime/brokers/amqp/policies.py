"""RabbitMQ: each lane's dead-lettering comes from a policy, not from queue arguments.

A queue declared with `x-dead-letter-*` arguments must be declared with exactly
those arguments by every client, producers included: a plain Celery producer that
declares the lane (`send_task(..., queue="billing.default")`) would be refused
with PRECONDITION_FAILED. A policy lives on the broker, matches queues by name,
and can be changed without redeclaring anything, which is what RabbitMQ
recommends. So the lanes are declared bare (quorum lanes with `x-queue-type`
only, which no policy can set) and one policy per lane routes its dead letters.

AMQP 0-9-1 cannot set policies; they are applied through the management HTTP API
(`RABBITMQ_MANAGEMENT_URL`) or, for a broker on this machine, `rabbitmqctl`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from workergen_runtime import project
from workergen_runtime.errors import ProjectError
from workergen_runtime.queues import dead_letter_queue, qualified_queue
from workergen_runtime.settings import LOOPBACK_HOSTS, Settings, mask_password
from workergen_runtime.worker.deliveries import broker_rules_ready, broker_rules_wanted

POLICY_SUFFIX = "dead-letters"

log = logging.getLogger(__name__)


class PolicyUnavailableError(ProjectError):
    """The policies could not be applied from here; the message says how to apply them."""


@dataclass(frozen=True)
class Policy:
    """One RabbitMQ policy, as `rabbitmqctl set_policy` and the HTTP API take it."""

    name: str
    pattern: str
    definition: dict[str, Any]
    priority: int
    vhost: str
    apply_to: str = "queues"

    def as_dict(self) -> dict[str, Any]:
        return {
            "vhost": self.vhost,
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "definition": self.definition,
            "priority": self.priority,
        }

    def rabbitmqctl_args(self) -> list[str]:
        return [
            "set_policy",
            "--vhost",
            self.vhost,
            "--priority",
            str(self.priority),
            "--apply-to",
            self.apply_to,
            self.name,
            self.pattern,
            json.dumps(self.definition, sort_keys=True),
        ]


def broker_vhost(settings: Settings) -> str:
    """The vhost of BROKER_URL (`amqp://host//` and `amqp://host` are `/`)."""
    path = urlsplit(settings.effective_broker_url).path
    return unquote(path[1:]) if len(path) > 1 else "/"


def lane_pattern(queue: str) -> str:
    """A pattern that matches this one queue name and nothing else."""
    return f"^{re.escape(queue)}$"


def lane_policies(settings: Settings) -> list[Policy]:
    """The dead-lettering policy of every lane under QUEUE_NAMESPACE.

    A rejected message (and, on quorum lanes, one delivered more than
    TASK_MAX_DELIVERIES times) goes to the lane's dead-letter queue. Each pattern
    is anchored and escaped, so it matches its lane only: never a lane of another
    namespace, nor a dead-letter queue.
    """
    ns = settings.queue_namespace
    policies = []
    for lane in project.LANES:
        queue = qualified_queue(lane, ns)
        dead_letters = dead_letter_queue(lane, ns)
        definition: dict[str, Any] = {
            "dead-letter-exchange": dead_letters,
            "dead-letter-routing-key": dead_letters,
        }
        if project.QUEUE_TYPE == "quorum":
            definition.update(
                {
                    # RabbitMQ dead-letters once the count of returns exceeds the
                    # limit, so N deliveries in all means a limit of N - 1.
                    "delivery-limit": settings.task_max_deliveries - 1,
                    # Dead-letter with confirms inside the broker: never dropped on the way.
                    "dead-letter-strategy": "at-least-once",
                    "overflow": "reject-publish",
                }
            )
        policies.append(
            Policy(
                name=f"{queue}.{POLICY_SUFFIX}",
                pattern=lane_pattern(queue),
                definition=definition,
                priority=settings.rabbitmq_policy_priority,
                vhost=broker_vhost(settings),
            )
        )
    return policies


def manual_commands(policies: list[Policy]) -> str:
    """The rabbitmqctl commands an operator runs to apply the policies by hand."""
    return "\n".join("  rabbitmqctl " + shlex.join(p.rabbitmqctl_args()) for p in policies)


def apply_policies(settings: Settings, policies: list[Policy] | None = None) -> str:
    """Set every lane's policy (idempotent); returns how they were applied.

    Through RABBITMQ_MANAGEMENT_URL when set, else `rabbitmqctl` when the broker
    runs on this machine. Raises PolicyUnavailableError, with the commands to run,
    when neither is possible.
    """
    policies = policies if policies is not None else lane_policies(settings)
    if settings.rabbitmq_management_url:
        return _apply_over_http(settings, policies)
    ctl = _local_rabbitmqctl(settings)
    if ctl is not None:
        return _apply_with_rabbitmqctl(ctl, policies)
    raise PolicyUnavailableError(
        "Cannot set the lanes' dead-letter policies from here: AMQP cannot set policies, "
        "RABBITMQ_MANAGEMENT_URL is empty and no rabbitmqctl reaches the broker.\n"
        + how_to_set(policies)
    )


def _local_rabbitmqctl(settings: Settings) -> str | None:
    """rabbitmqctl on PATH, when the broker runs on this machine (it reaches no other)."""
    ctl = shutil.which("rabbitmqctl")
    host = urlsplit(settings.effective_broker_url).hostname or "localhost"
    return ctl if ctl and host in LOOPBACK_HOSTS else None


def _same(policy: Policy, found: dict[str, Any]) -> bool:
    """Whether a policy `rabbitmqctl list_policies` reports is this one, to the letter."""
    definition = found.get("definition")
    if isinstance(definition, str):  # RabbitMQ 3.x reports it as a JSON text
        try:
            definition = json.loads(definition)
        except ValueError:
            return False
    return (
        found.get("name") == policy.name
        and found.get("pattern") == policy.pattern
        and found.get("apply-to") == policy.apply_to
        and str(found.get("priority")) == str(policy.priority)
        and definition == policy.definition
    )


def _not_held(policies: list[Policy], found: list[dict[str, Any]]) -> list[Policy]:
    """The policies that are not among those found on the broker, to the letter."""
    return [p for p in policies if not any(_same(p, row) for row in found)]


def _listed_with_rabbitmqctl(ctl: str, policies: list[Policy]) -> list[dict[str, Any]]:
    """The policies the broker holds in the vhosts of `policies`, as rabbitmqctl lists them.

    Raises PolicyUnavailableError, saying why, when rabbitmqctl cannot list them.
    """
    found: list[dict[str, Any]] = []
    for vhost in sorted({policy.vhost for policy in policies}):
        try:
            listed = subprocess.run(
                [ctl, "--quiet", "list_policies", "--vhost", vhost, "--formatter", "json"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PolicyUnavailableError(f"rabbitmqctl list_policies failed: {exc}") from None
        try:
            rows = json.loads(listed.stdout) if listed.returncode == 0 else None
        except ValueError:
            rows = None
        if not isinstance(rows, list):
            detail = (listed.stderr or listed.stdout).strip() or f"exit {listed.returncode}"
            raise PolicyUnavailableError(f"rabbitmqctl list_policies failed: {detail}")
        found.extend(row for row in rows if isinstance(row, dict) and row.get("vhost") == vhost)
    return found


def _missing_policies(ctl: str, policies: list[Policy]) -> list[Policy]:
    """The policies the broker does not hold as they are; all of them if it cannot tell.

    A worker restarts far more often than its lanes change: then one
    `list_policies` is all it runs, and nothing on the broker is set again.
    """
    try:
        return _not_held(policies, _listed_with_rabbitmqctl(ctl, policies))
    except PolicyUnavailableError:
        return policies


def _apply_with_rabbitmqctl(ctl: str, policies: list[Policy]) -> str:
    # Each rabbitmqctl starts an Erlang node (about half a second of CPU): the
    # missing policies are imported together, as definitions read from stdin, by one.
    missing = _missing_policies(ctl, policies)
    if not missing:
        return "rabbitmqctl"
    definitions = json.dumps({"policies": [policy.as_dict() for policy in missing]})
    try:
        done = subprocess.run(
            [ctl, "--quiet", "import_definitions", "--format", "json"],
            input=definitions,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        detail = str(exc)
    else:
        if done.returncode == 0:
            return "rabbitmqctl"
        detail = (done.stderr or done.stdout).strip()
    names = ", ".join(policy.name for policy in missing)
    raise PolicyUnavailableError(
        f"rabbitmqctl could not set the policies {names}: {detail}\n"
        "Run it as a user allowed to manage the broker:\n" + manual_commands(policies)
    )


def _management_call(
    settings: Settings, path: str, what: str, body: dict[str, Any] | None = None
) -> Any:
    """One call of the management API at RABBITMQ_MANAGEMENT_URL: a PUT of `body`, else a GET.

    Returns the decoded answer of a GET; raises PolicyUnavailableError saying why
    `what` (e.g. "the policy x") failed.
    """
    parts = urlsplit(settings.rabbitmq_management_url)
    broker = urlsplit(settings.effective_broker_url)
    user = unquote(parts.username or broker.username or "guest")
    password = unquote(parts.password or broker.password or "guest")
    port = f":{parts.port}" if parts.port else ""
    base = f"{parts.scheme or 'http'}://{parts.hostname}{port}{parts.path.rstrip('/')}"
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    safe = mask_password(settings.rabbitmq_management_url)
    request = urllib.request.Request(
        f"{base}/api/{path}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "PUT",
        headers={"Content-Type": "application/json", "Authorization": f"Basic {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read() or b"null") if body is None else None
    except urllib.error.HTTPError as exc:
        raise PolicyUnavailableError(
            f"The management API at {safe} refused {what}: HTTP {exc.code} {exc.reason}. "
            "The user needs the 'policymaker' or 'administrator' tag on the vhost."
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PolicyUnavailableError(
            f"Cannot reach the management API at {safe}: {exc}. Is the "
            "rabbitmq_management plugin enabled (rabbitmq-plugins enable rabbitmq_management)?"
        ) from None


def _apply_over_http(settings: Settings, policies: list[Policy]) -> str:
    for policy in policies:
        body = {k: v for k, v in policy.as_dict().items() if k not in ("vhost", "name")}
        where = f"policies/{quote(policy.vhost, safe='')}/{quote(policy.name, safe='')}"
        _management_call(settings, where, f"the policy {policy.name}", body)
    return f"the management API at {mask_password(settings.rabbitmq_management_url)}"


def _listed_over_http(settings: Settings, policies: list[Policy]) -> list[dict[str, Any]]:
    """The policies the broker holds in the vhosts of `policies`, from the management API."""
    found: list[dict[str, Any]] = []
    for vhost in sorted({policy.vhost for policy in policies}):
        rows = _management_call(settings, f"policies/{quote(vhost, safe='')}", "the policies")
        if not isinstance(rows, list):
            raise PolicyUnavailableError("The management API did not answer a list of policies.")
        found.extend(row for row in rows if isinstance(row, dict))
    return found


def missing_policies(settings: Settings) -> list[Policy]:
    """The lanes' dead-letter policies the broker does not hold as wanted (none: all set).

    Read the way `apply_policies` sets them: through RABBITMQ_MANAGEMENT_URL when
    set, else `rabbitmqctl` when the broker runs on this machine. Raises
    PolicyUnavailableError, with how to set them, when they cannot be read.
    """
    policies = lane_policies(settings)
    if settings.rabbitmq_management_url:
        return _not_held(policies, _listed_over_http(settings, policies))
    ctl = _local_rabbitmqctl(settings)
    if ctl is None:
        raise PolicyUnavailableError(
            "Cannot read the lanes' dead-letter policies from here: AMQP cannot read policies, "
            "RABBITMQ_MANAGEMENT_URL is empty and no rabbitmqctl reaches the broker."
        )
    return _not_held(policies, _listed_with_rabbitmqctl(ctl, policies))


def how_to_set(policies: list[Policy]) -> str:
    """What an operator does to set these policies."""
    return (
        "Set RABBITMQ_MANAGEMENT_URL (e.g. http://user:password@rabbit:15672) and run "
        "`queue provision`, or apply them on the broker:\n" + manual_commands(policies)
    )


def apply_at_start(settings: Settings) -> str:
    """Worker start-up: set the policies, or say what is missing without them; never fails."""
    try:
        how = apply_policies(settings)
    except PolicyUnavailableError as exc:
        delivery_limit = (
            " and nothing bounds the deliveries of a job that kills its worker"
            if project.QUEUE_TYPE == "quorum"
            else ""
        )
        return (
            f"Warning: {exc}\nWithout them the worker still dead-letters failed, refused and "
            "unknown jobs itself, but a message it rejects is dropped" + delivery_limit + "."
        )
    return f"RabbitMQ: the lanes' dead-letter policies are set ({how})."


# How long the background check waits for the worker to be consuming before it
# runs anyway (a worker that cannot reach its broker yet rejects nothing).
READY_WAIT = 10.0
# Then it waits for a quiet moment: no job reserved or running for QUIET_FOR
# seconds, looked at every QUIET_POLL, for QUIET_WAIT seconds at most.
QUIET_FOR = 0.5
QUIET_POLL = 0.1
QUIET_WAIT = 60.0
# How long a worker that stops waits for a check under way to finish.
STOP_WAIT = 30.0


def worker_is_quiet() -> bool:
    """Whether this worker holds no job, reserved or running."""
    from celery.worker import state

    return not state.reserved_requests


def apply_in_background(settings: Settings) -> threading.Thread:
    """Worker start-up: apply the policies once the worker is quiet, off its start-up path.

    Checking them costs an Erlang node (`rabbitmqctl`: about half a second of
    CPU) or HTTP calls, which neither the start nor the first jobs need wait for:
    the worker dead-letters failed, refused and unknown jobs itself. The check
    starts once the worker consumes and has held no job for a moment (at most
    QUIET_WAIT seconds after it is ready), at a lower CPU priority on Linux, so
    a worker that starts on a backlog spends its CPUs on jobs. What relies on
    the broker's dead-lettering (a message rejected without requeue, a return
    a quorum lane counts) starts the check at once and waits for it
    (`deliveries.await_broker_rules`). The outcome is logged once known: a
    warning when the policies could not be set. A worker that stops starts a
    check not yet run and lets it finish, so even a short-lived worker leaves
    its lanes' policies set.
    """
    from celery import signals

    broker_rules_ready.clear()
    broker_rules_wanted.clear()
    consuming = threading.Event()
    thread = threading.Thread(
        target=_apply_and_report, args=(settings, consuming), name="lane-policies", daemon=True
    )

    def finish(**_: Any) -> None:
        if consuming.is_set():
            broker_rules_wanted.set()
            thread.join(STOP_WAIT)

    signals.worker_ready.connect(lambda **_: consuming.set(), weak=False)
    signals.worker_shutdown.connect(finish, weak=False)
    thread.start()
    return thread


def wait_for_quiet() -> None:
    """Return once the worker has been quiet for QUIET_FOR seconds, after QUIET_WAIT
    seconds, or as soon as something waits for the broker's rules."""
    deadline = time.monotonic() + QUIET_WAIT
    quiet_since: float | None = None
    while not broker_rules_wanted.is_set():
        now = time.monotonic()
        if now >= deadline:
            return
        if not worker_is_quiet():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= QUIET_FOR:
            return
        broker_rules_wanted.wait(QUIET_POLL)


def _apply_and_report(settings: Settings, consuming: threading.Event) -> None:
    try:
        consuming.wait(READY_WAIT)
        wait_for_quiet()
        if sys.platform == "linux":  # niceness is per thread there, and what it starts inherits it
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        outcome = apply_at_start(settings)
    except Exception as exc:  # never leave the rejects waiting
        outcome = f"Warning: the lanes' dead-letter policies were not checked: {exc!r}"
    finally:
        broker_rules_ready.set()
    warning = outcome.startswith("Warning:")
    if log.hasHandlers():
        log.log(logging.WARNING if warning else logging.INFO, outcome.removeprefix("Warning: "))
    else:  # before the worker's logging is set up
        print(outcome, file=sys.stderr, flush=True)
