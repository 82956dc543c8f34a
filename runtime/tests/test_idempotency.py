"""Idempotent jobs: what a delivery does with a key it finds claimed, without a broker."""

from bound import answer_independent

from workergen_runtime.idempotency import Claim, Holder, Verdict, decide

# What a claim decides, a pure function: no broker and no answer of the project.
pytestmark = answer_independent

ME = Holder("worker-1+4026531836", 100, "555")
SIBLING = Holder("worker-1+4026531836", 101, "556")
ELSEWHERE = Holder("worker-2+4026531836", 101, "556")


def running(task_id: str, attempt: int, holder: Holder | None) -> str:
    return str(Claim("running", task_id, attempt, holder))


def verdict(value: str, task_id: str = "t-1", attempt: int = 0, **options) -> Verdict:
    alive = options.pop("alive", {SIBLING: True}.get)
    return decide(value, task_id, attempt, me=ME, alive=alive, **options)


def test_done_and_other_deliveries_are_skipped() -> None:
    assert verdict("done") is Verdict.DONE
    assert verdict(running("t-2", 0, SIBLING)) is Verdict.BUSY
    # An older attempt of the claiming delivery: the claim has moved on.
    assert verdict(running("t-1", 2, SIBLING), attempt=1) is Verdict.BUSY
    assert verdict("not a claim") is Verdict.BUSY


def test_a_later_attempt_continues_the_claiming_delivery() -> None:
    assert verdict(running("t-1", 0, SIBLING), attempt=1) is Verdict.CONTINUE
    assert verdict("retrying:t-1:0", attempt=1) is Verdict.CONTINUE
    assert verdict("running:t-1:0", attempt=1) is Verdict.CONTINUE


def test_the_same_attempt_runs_again_only_when_its_process_is_gone() -> None:
    value = running("t-1", 0, SIBLING)
    assert verdict(value, alive={SIBLING: True}.get) is Verdict.BUSY
    assert verdict(value, alive={SIBLING: False}.get) is Verdict.TAKE_OVER
    # Another host: its processes cannot be checked from here.
    assert verdict(running("t-1", 0, ELSEWHERE), alive=lambda holder: None) is Verdict.DEFER
    # Written before claims named their holder.
    assert verdict("running:t-1:0") is Verdict.DEFER
    # That attempt ended asking for a retry: this is a duplicate of it.
    assert verdict("retrying:t-1:0") is Verdict.BUSY


def test_a_claim_of_this_process_is_alive_only_while_it_runs_here() -> None:
    value = running("t-1", 0, ME)
    assert verdict(value, running_here={value}) is Verdict.BUSY
    assert verdict(value, running_here=set()) is Verdict.TAKE_OVER


def test_claims_read_back_as_written_even_with_colons_in_the_task_id() -> None:
    claim = Claim("running", "order:7:charge", 3, ME)
    assert Claim.parse(str(claim)) == claim
    assert Claim.parse("retrying:a:b:1") == Claim("retrying", "a:b", 1)
    assert Claim.parse("running:t-1:x") is None
    assert Claim.parse("done") is None
