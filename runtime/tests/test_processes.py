"""Worker processes: when this host can tell that one is gone, and a worker id's parts."""

import os
import signal
import subprocess
import sys
import time

import pytest
from bound import answer_independent

from workergen_runtime.brokers.redis.recovery import Owner
from workergen_runtime.worker.processes import (
    Holder,
    proc_stat,
    process_alive,
    process_gone,
    this_process,
)

linux_only = pytest.mark.skipif(not this_process().started, reason="start times come from /proc")
# Processes of this host: no broker and no answer of the project.
pytestmark = answer_independent


@pytest.mark.skipif(os.name == "nt", reason="Windows: other processes are not probed")
def test_a_process_is_alive_until_it_exits_and_unknown_on_another_host() -> None:
    me = this_process()
    assert process_alive(me) is True
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_alive(Holder(me.host, child.pid, me.started)) is False
    assert process_alive(Holder(f"not-{me.host}", me.pid, me.started)) is None


@linux_only
def test_a_pid_taken_by_a_newer_process_is_not_the_holder() -> None:
    me = this_process()
    assert process_alive(Holder(me.host, me.pid, str(int(me.started) - 1))) is False


def _leader_of_a_group(script: str) -> tuple[subprocess.Popen[str], Holder]:
    """A shell leading its own process group, as a supervisor starts a worker."""
    shell = subprocess.Popen(
        ["sh", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    stat = proc_stat(shell.pid)
    assert stat is not None
    return shell, Holder(this_process().host, shell.pid, stat[19])


@linux_only
def test_a_process_is_gone_only_once_nothing_it_started_is_left_in_its_group() -> None:
    # The shell stands for a worker, its `sleep` for a pool process still running a job.
    shell, holder = _leader_of_a_group("sleep 30 & echo $!; wait")
    assert shell.stdout is not None
    orphan = int(shell.stdout.readline())
    try:
        assert process_gone(holder, shell.pid) is False  # alive
        os.kill(shell.pid, signal.SIGKILL)
        shell.wait()
        assert process_gone(holder, shell.pid) is False  # its pool process still runs
    finally:
        os.kill(orphan, signal.SIGKILL)
    for _ in range(250):  # the signal is delivered at once; the orphan is dead soon after
        stat = proc_stat(orphan)
        if stat is None or stat[0] in ("Z", "X"):
            break
        time.sleep(0.02)
    assert process_gone(holder, shell.pid) is True


@linux_only
def test_a_process_of_another_host_or_without_a_start_time_is_never_gone() -> None:
    shell, holder = _leader_of_a_group("exit 0")
    shell.wait()
    assert process_gone(holder, shell.pid) is True
    elsewhere = Holder(f"not-{holder.host}", holder.pid, holder.started)
    assert process_gone(elsewhere, shell.pid) is False
    assert process_gone(Holder(holder.host, holder.pid, ""), shell.pid) is False


# Redis: the worker id that the project's transport records with each message it holds
# (read without a broker, so checked whichever broker the project has).
def test_a_worker_id_names_its_process_and_group_and_old_ids_name_none() -> None:
    me = this_process()
    assert Owner.parse(f"{me}/{os.getpid()}/0a1b2c3d") == Owner(me, os.getpid())
    assert Owner.parse("worker-1.4242.0a1b2c3d") is None
    assert Owner.parse("host+1/12/34/x/0a1b2c3d") is None
