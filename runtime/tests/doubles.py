"""Stand-ins for the worker's parts, for the tests that need no broker."""

from workergen_runtime.celery_app import app as celery_app
from workergen_runtime.deadletter import DeadLetter, DeadLetterStore
from workergen_runtime.worker.consumer import DeadLetterConsumer


class MemoryStore(DeadLetterStore):
    """Keeps dead letters in a list, or refuses them like a broker that is down."""

    def __init__(self, broken: bool = False) -> None:
        self.letters: list[DeadLetter] = []
        self.broken = broken

    def record(self, letter: DeadLetter) -> None:
        if self.broken:
            raise ConnectionError("store unavailable")
        self.letters.append(letter)

    def list(self, lane=None):
        return self.letters

    def show(self, letter_id):
        return next(x for x in self.letters if x.id == letter_id)

    def replay(self, letter_id):
        raise NotImplementedError

    def purge(self, lane=None):
        return 0


def consumer(hostname: str = "old@host") -> DeadLetterConsumer:
    """The worker's consumer, for its message callbacks only: no connection, no blueprint."""
    instance = DeadLetterConsumer.__new__(DeadLetterConsumer)
    instance.app = celery_app
    instance.connection_errors = ()
    instance.hostname = hostname
    return instance
