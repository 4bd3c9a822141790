"""Settlement rules that need no chain or database: backoff delays, when a parked escrow is
due, what a sweep moved per escrow, and which failed simulations split a batch."""

from __future__ import annotations

from invoicing.chain.abi import selector
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.settlement.backoff import Backoff, retry_delay_s
from invoicing.settlement.parking import is_due
from invoicing.settlement.swept import moved_by_escrow
from invoicing.settlement.withdrawals import fails_in_execution, failure_reason
from invoicing.tables.settlement import ParkedEscrow


def test_retry_delays_double_from_the_base_up_to_the_cap() -> None:
    delays = [retry_delay_s(n, 60, 1000) for n in range(0, 7)]

    assert delays == [0.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1000.0]
    assert retry_delay_s(10_000, 60, 86400) == 86400.0  # no overflow after many failures


def test_backoff_holds_a_failed_key_until_its_delay_passed_and_forgets_it_on_success() -> None:
    backoff = Backoff(base_s=1, max_s=3)
    key, other = ("owner", "token"), ("someone", "token")

    first = backoff.failed(key, now_ms=10_000)
    second = backoff.failed(key, now_ms=11_000)
    third = backoff.failed(key, now_ms=13_000)

    assert (first, second, third) == (1.0, 2.0, 3.0)
    assert not backoff.ready(key, 15_999) and backoff.ready(key, 16_000)
    assert backoff.ready(other, 10_000)  # other keys are not held
    backoff.succeeded(key)
    assert backoff.ready(key, 0) and backoff.failures(key) == 0


def parked(balance: int, retry_at: int) -> ParkedEscrow:
    return ParkedEscrow(invoice_id="i", balance_raw=str(balance), next_retry_at=retry_at)


def test_an_escrow_is_due_when_it_holds_a_known_balance_and_is_not_waiting() -> None:
    assert is_due(5, None, 0)
    assert not is_due(0, None, 0)
    assert not is_due(None, None, 0)  # unreadable: unknown, left alone
    assert not is_due(5, parked(5, retry_at=1_000), 999)  # parked, same balance, not yet
    assert is_due(5, parked(5, retry_at=1_000), 1_000)  # its retry time came
    assert is_due(6, parked(5, retry_at=1_000), 0)  # its balance changed
    assert not is_due(None, parked(5, retry_at=1_000), 2_000)


def test_what_a_sweep_moved_per_escrow_follows_the_balances_and_the_event() -> None:
    planned = {"a": 100, "b": 200, "c": 300, "d": 50}
    after = {"a": 0, "b": 200, "c": 10, "d": None}

    assert moved_by_escrow(planned, after, event_total=390) == {
        "a": 100,
        "b": 0,  # still holds everything: a token that blocks it
        "c": 290,
        "d": None,  # unreadable afterwards: unknown
    }
    # The event's total covers the unreadable one besides the others: it moved its balance.
    assert moved_by_escrow(planned, after, event_total=440)["d"] == 50
    # The event says nothing moved: no escrow counts as swept, whatever the balances say.
    assert moved_by_escrow(planned, after, event_total=0) == {"a": 0, "b": 0, "c": 0, "d": 0}
    assert moved_by_escrow({"a": 100}, {"a": None}, event_total=100) == {"a": 100}
    assert moved_by_escrow({"a": 100}, {"a": None}, event_total=0) == {"a": 0}
    assert moved_by_escrow({"a": 100, "b": 5}, {"a": None, "b": 0}, event_total=5) == {
        "a": None,  # the event does not cover it: unknown
        "b": 5,
    }
    # A lone escrow moved what the event reports (a payment after planning included).
    assert moved_by_escrow({"a": 100}, {"a": 0}, event_total=130) == {"a": 130}
    assert moved_by_escrow({"a": 100}, {"a": 100}, event_total=0) == {"a": 0}


def test_only_the_calls_own_failures_split_a_batch() -> None:
    blocked = selector("SenderBlocked(address)") + bytes(32)
    named = selector("NativeTransferFailed(address)") + bytes(32)

    assert fails_in_execution(ContractRevert(3, "execution reverted", blocked))
    assert fails_in_execution(RpcError(-32000, "Out of gas: gas required exceeds allowance"))
    assert not fails_in_execution(RpcError(-32005, "limit exceeded"))
    assert not fails_in_execution(RpcError(-32000, "insufficient funds for gas * price + value"))

    assert failure_reason(ContractRevert(3, "execution reverted", named)) == (
        "withdraw reverts with NativeTransferFailed"
    )
    assert failure_reason(ContractRevert(3, "execution reverted", blocked)) == (
        "withdraw reverts with 0x" + blocked[:36].hex()
    )
    assert failure_reason(ContractRevert(3, "execution reverted", b"")) == (
        "withdraw reverts: execution reverted"
    )
    assert failure_reason(RpcError(-32000, "out of gas " + "x" * 500)) == (
        "withdraw fails: " + ("out of gas " + "x" * 500)[:200]
    )
