"""Worker processes named so that another process can tell whether they still run.

A process is named by its host (hostname and PID namespace: where a pid names the same
process), its pid and its start time (Linux /proc; empty elsewhere), so a pid taken again
by a newer process is not mistaken for it. Idempotency claims (idempotency.py) and
the Redis holders of unacknowledged messages (recovery.py) name their process so.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Holder:
    """A worker process: the holder of a claim or of unacknowledged messages."""

    host: str
    pid: int
    started: str = ""

    def __str__(self) -> str:
        return f"{self.host}/{self.pid}/{self.started}"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        host, _, rest = text.partition("/")
        pid, _, started = rest.partition("/")
        return cls(host, int(pid), started) if host and pid.isdigit() else None


def proc_stat(pid: int) -> list[str] | None:
    """Linux: the fields of /proc/<pid>/stat after the command name (state first)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _this_host() -> str:
    """The hostname and PID namespace: where a pid names the same process."""
    host = socket.gethostname().replace(":", "_").replace("/", "_")
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # pid:[4026531836]
    except OSError:
        return host
    return f"{host}+{namespace.removeprefix('pid:[').removesuffix(']')}"


@functools.cache
def _process(pid: int) -> Holder:
    stat = proc_stat(pid)
    return Holder(_this_host(), pid, stat[19] if stat and len(stat) > 19 else "")


def this_process() -> Holder:
    """This process as a holder."""
    return _process(os.getpid())


def process_alive(holder: Holder) -> bool | None:
    """Whether the holder still runs; None when this host cannot tell (another host)."""
    if holder.host != this_process().host or os.name == "nt":  # nt: os.kill would end it
        return None
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    stat = proc_stat(holder.pid)
    if stat is None:
        return True  # no /proc: the pid exists, and that is all one can tell
    if stat[0] in ("Z", "X"):
        return False  # dead, not yet reaped
    return not holder.started or (len(stat) > 19 and stat[19] == holder.started)


def process_group() -> int:
    """This process's group (0 where there are none)."""
    return os.getpgrp() if hasattr(os, "getpgrp") else 0


def left_in_group(group: int, since: str) -> bool | None:
    """Whether process group `group` still has a process started at `since` or later.

    A worker killed outright may leave processes behind in its group - a pool process
    orphaned by a SIGKILL of the main process finishes the job it runs - and those
    started after the worker can only be its own. This process and its children do not
    count (a worker restarted in the same group). None without /proc.
    """
    if not since.isdigit() or not (PROC / "self" / "stat").exists():
        return None
    me = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        stat = proc_stat(int(entry.name))
        if stat is None or len(stat) <= 19 or stat[0] in ("Z", "X"):
            continue  # gone meanwhile, or dead
        ppid, pgrp, started = int(stat[1]), int(stat[2]), int(stat[19])
        if pgrp == group and started >= int(since) and ppid != me:
            return True
    return False


def process_gone(holder: Holder, group: int) -> bool:
    """Whether this host can tell for sure that the holder and all it started are gone."""
    if not holder.started or process_alive(holder) is not False:
        return False
    return left_in_group(group, holder.started) is False
