"""The project's own signals, beside Celery's: what metrics (or your code) may listen to."""

from __future__ import annotations

from celery.utils.dispatch import Signal

# A job became a dead letter: `letter` is the DeadLetter recorded. Sent in the
# worker's main process, once the broker holds the letter.
dead_lettered = Signal(name="dead_lettered", providing_args={"letter"})

# An idempotent job was not run: its key's work is done or under way elsewhere.
duplicate_skipped = Signal(name="duplicate_skipped", providing_args={"task", "key"})
