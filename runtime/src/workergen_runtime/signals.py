"""The project's own signals, beside Celery's: what metrics (or your code) may listen to."""

from __future__ import annotations

from celery.utils.dispatch import Signal

# A job became a dead letter: `letter` is the DeadLetter recorded. Sent in the
# worker's main process, once the broker holds the letter. For metrics.
dead_lettered = Signal(name="dead_lettered", providing_args={"letter"})

# The public hook (docs/runtime.md): sent once per dead letter, in the process
# that consumed the message (a worker's main process with the prefork pool),
# after the store holds the letter and the message is acknowledged. A receiver
# that raises is logged; the letter stays stored and the worker goes on.
job_dead_lettered = Signal(
    name="job_dead_lettered",
    providing_args={
        "letter",
        "letter_id",
        "task_id",
        "task_name",
        "reason",
        "lane",
        "exception",
        "attempts",
    },
)

# An idempotent job was not run: its key's work is done or under way elsewhere.
duplicate_skipped = Signal(name="duplicate_skipped", providing_args={"task", "key"})
