"""Transfers into escrows read from a node's answers (``chain.transfers``): the examples a
node sends, and any JSON at all never raising and never naming an escrow it was not sent to."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.chain.transfers import (
    TRANSFER_TOPIC,
    Transfer,
    parse_block_transactions,
    parse_call_frames,
    parse_parity_traces,
    parse_transfer_log,
    topic_of,
)

ESCROW = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
PAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
CONTRACT = "0x82B769500E34362a76DF81150e12C746093D954F"
TX = "0x" + "ab" * 32
BLOCK = "0x" + "cd" * 32


def transfer_log(amount: int, **changes: Any) -> dict[str, Any]:
    log = {
        "address": "0xeE8e0000000000000000000000000000000000aa",
        "topics": [TRANSFER_TOPIC, topic_of(PAYER), topic_of(ESCROW)],
        "data": "0x" + amount.to_bytes(32, "big").hex(),
        "blockNumber": "0x11",
        "blockHash": BLOCK,
        "transactionHash": TX,
        "logIndex": "0x2",
        "removed": False,
    }
    return log | changes


def test_a_transfer_log_to_an_escrow_is_read_with_its_sender_and_place() -> None:
    found = parse_transfer_log(transfer_log(4_000_000), {ESCROW})

    assert found == Transfer(ESCROW, TX, "log:2", PAYER, 4_000_000, 17, BLOCK)


def test_a_removed_log_a_zero_amount_or_another_recipient_is_no_transfer() -> None:
    assert parse_transfer_log(transfer_log(5, removed=True), {ESCROW}) is None
    assert parse_transfer_log(transfer_log(0), {ESCROW}) is None
    assert parse_transfer_log(transfer_log(5), {PAYER}) is None


def test_a_contracts_internal_transfer_is_found_and_a_reverted_ones_is_not() -> None:
    traces = [
        {"action": {"from": PAYER, "to": None, "value": "0x5"}, "type": "create",
         "transactionHash": TX, "traceAddress": [], "blockNumber": 17},
        {"action": {"from": CONTRACT, "to": ESCROW, "value": "0x5", "callType": "call"},
         "type": "call", "transactionHash": TX, "traceAddress": [0], "blockNumber": 17},
        {"action": {"from": PAYER, "to": CONTRACT, "value": "0x0", "callType": "call"},
         "type": "call", "transactionHash": "0x" + "01" * 32, "traceAddress": [],
         "blockNumber": 17, "error": "Reverted"},
        {"action": {"from": CONTRACT, "to": ESCROW, "value": "0x9", "callType": "call"},
         "type": "call", "transactionHash": "0x" + "01" * 32, "traceAddress": [0],
         "blockNumber": 17},
    ]  # fmt: skip

    found = parse_parity_traces(traces, {ESCROW}, BLOCK)

    assert found == [Transfer(ESCROW, TX, "trace:0", CONTRACT, 5, 17, BLOCK)]


def test_call_frames_give_the_same_transfers() -> None:
    frames = [
        {"txHash": TX, "result": {"type": "CREATE", "from": PAYER, "to": CONTRACT,
         "value": "0x5", "calls": [{"type": "CALL", "from": CONTRACT, "to": ESCROW,
                                    "value": "0x5"}]}},
    ]  # fmt: skip

    found = parse_call_frames(frames, {ESCROW}, 17, BLOCK)

    assert found == [Transfer(ESCROW, TX, "trace:0", CONTRACT, 5, 17, BLOCK)]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=70),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=6)
    ),
    max_leaves=30,
)
FIELDS = st.sampled_from(
    ["topics", "data", "blockNumber", "blockHash", "transactionHash", "logIndex", "removed"]
)


@settings(max_examples=300, deadline=None)
@given(JSON, JSON)
def test_any_answer_is_read_without_raising_and_only_for_the_escrows_asked(
    answer: Any, other: Any
) -> None:
    escrows = {ESCROW}
    found = [
        parse_transfer_log(answer, escrows),
        *parse_parity_traces(answer, escrows, BLOCK),
        *parse_call_frames(answer, escrows, 1, BLOCK),
        *parse_block_transactions(answer, escrows),
        *parse_parity_traces([answer, other], escrows, BLOCK),
    ]
    for transfer in found:
        assert transfer is None or (transfer.to == ESCROW and transfer.amount_raw > 0)


@settings(deadline=None)
@given(FIELDS, JSON)
def test_a_log_with_any_field_replaced_is_its_transfer_or_none(field: str, value: Any) -> None:
    found = parse_transfer_log(transfer_log(7, **{field: value}), {ESCROW})

    assert found is None or (found.to, found.sender, found.amount_raw) == (ESCROW, PAYER, 7)
