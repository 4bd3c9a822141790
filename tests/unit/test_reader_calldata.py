"""The EscrowReader's calldata and answers are written by hand; they must equal the ABI
encoding. Its calls are cut by estimated gas, in order, and an answer cut short is resumed."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode
from eth_abi.exceptions import DecodingError
from hypothesis import given
from hypothesis import strategies as st

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import ESCROW_READER
from invoicing.chain.calldata import UNREADABLE
from invoicing.chain.reader import (
    CALL_GAS,
    Group,
    account_gas,
    chunk_groups,
    decode_read,
    encode_read,
    remaining,
)

A = "0x52908400098527886E0F7030069857D2E4169EE7"
B = "0x8617E340B3D01FA5F11F306F4090FD50E238070D"
C = "0xde709f2102306220921060314715629080e2fb77"
TOKEN = "0x27b1fdb04752bbc536007a920d24acb045561c26"
PARENT = bytes(range(32))

addresses = st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex())
groups_strategy = st.lists(
    st.tuples(st.none() | addresses, st.lists(addresses, max_size=5)), max_size=4
)


def abi_read(groups: list[Group]) -> bytes:
    tokens = [token or ZERO_ADDRESS for token, _ in groups]
    counts = [len(accounts) for _, accounts in groups]
    accounts = [account for _, group in groups for account in group]
    return encode_call(ESCROW_READER, "read", tokens, counts, accounts)


@pytest.mark.parametrize(
    "groups", [[(None, [A, B]), (TOKEN, [C])], [(TOKEN, [])], [], [(None, [A])]]
)
def test_encode_read_equals_the_abi_encoding(groups: list[Group]) -> None:
    assert encode_read(groups) == abi_read(groups)


@given(groups_strategy)
def test_encode_read_equals_the_abi_encoding_for_any_groups(groups: list[Group]) -> None:
    assert encode_read(groups) == abi_read(groups)


def test_encode_read_refuses_an_address_that_is_not_20_bytes() -> None:
    with pytest.raises(ValueError):
        encode_read([(None, [A[:-2]])])


def test_decode_read_reads_the_block_its_parent_and_the_values() -> None:
    answer = encode(["uint256", "bytes32", "uint256[]"], [17, PARENT, [5, UNREADABLE, 2**255, 0]])

    decoded = decode_read(answer)

    assert (decoded.block, decoded.parent_hash) == (17, PARENT)
    assert decoded.values == [5, None, 2**255, 0]


@given(st.integers(0, 2**64), st.lists(st.integers(0, 2**256 - 1), max_size=8))
def test_decode_read_reads_any_abi_answer(block: int, values: list[int]) -> None:
    decoded = decode_read(encode(["uint256", "bytes32", "uint256[]"], [block, PARENT, values]))

    assert decoded.block == block
    assert decoded.values == [None if v == UNREADABLE else v for v in values]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes(127),
        encode(["uint256", "bytes32", "uint256[]"], [1, PARENT, [1, 2]])[:-1],
        bytes(64) + (64).to_bytes(32, "big") + bytes(32),  # the offset points into the head
        bytes(64) + (97).to_bytes(32, "big") + bytes(64),  # not word-aligned
    ],
)
def test_decode_read_refuses_a_malformed_answer(data: bytes) -> None:
    with pytest.raises(DecodingError):
        decode_read(data)


@given(st.binary(max_size=300))
def test_decode_read_of_any_bytes_answers_or_raises_decoding_error(data: bytes) -> None:
    try:
        decoded = decode_read(data)
    except DecodingError:
        return
    assert 32 * len(decoded.values) <= len(data)


def test_calls_are_cut_by_estimated_gas_in_order() -> None:
    native, token = account_gas(None), account_gas(TOKEN)
    assert native < token < 2 * native
    budget = CALL_GAS + 2 * native  # two native escrows, or one token escrow

    calls = chunk_groups([(None, [A, B, C]), (TOKEN, [A, B])], budget)

    assert calls == [[(None, [A, B])], [(None, [C])], [(TOKEN, [A])], [(TOKEN, [B])]]
    assert chunk_groups([(None, [A]), (TOKEN, [B, C])], CALL_GAS + native + token) == [
        [(None, [A]), (TOKEN, [B])],
        [(TOKEN, [C])],
    ]


def test_an_account_over_the_budget_still_gets_a_call_of_its_own() -> None:
    assert chunk_groups([(TOKEN, [A, B])], budget=CALL_GAS) == [[(TOKEN, [A])], [(TOKEN, [B])]]


@given(groups_strategy, st.integers(CALL_GAS, CALL_GAS + 40_000))
def test_calls_hold_every_account_once_in_order(groups: list[Group], budget: int) -> None:
    calls = chunk_groups(groups, budget)

    flat = [(token, a) for call in calls for token, accounts in call for a in accounts]
    assert flat == [(token, a) for token, accounts in groups for a in accounts]
    for call in calls:
        cost = CALL_GAS + sum(account_gas(t) * len(accounts) for t, accounts in call)
        assert cost <= budget or sum(len(accounts) for _, accounts in call) == 1


def test_remaining_drops_the_accounts_answered() -> None:
    groups: list[Group] = [(None, [A, B]), (TOKEN, [C, A])]

    assert remaining(groups, 0) == groups
    assert remaining(groups, 2) == [(TOKEN, [C, A])]
    assert remaining(groups, 3) == [(TOKEN, [A])]
    assert remaining(groups, 4) == []


@given(
    st.integers(0, 2**64),
    st.lists(st.one_of(st.just(0), st.just(UNREADABLE), st.integers(0, 2**256 - 1)), max_size=8),
    st.integers(0, 600),
    st.integers(0, 300),
)
def test_decode_read_of_the_hex_text_answers_as_of_the_bytes(
    block: int, values: list[int], zeros_before: int, zeros_after: int
) -> None:
    """Runs of zero words (compared in the text, 256 words at a time) around any values."""
    laid = [0] * zeros_before + values + [0] * zeros_after
    answer = encode(["uint256", "bytes32", "uint256[]"], [block, PARENT, laid])

    assert decode_read(answer.hex()) == decode_read(answer)
    assert decode_read(answer.hex().upper()) == decode_read(answer)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0" * 255,
        encode(["uint256", "bytes32", "uint256[]"], [1, PARENT, [1, 2]]).hex()[:-2],  # short
        encode(["uint256", "bytes32", "uint256[]"], [1, PARENT, [1, 2]]).hex() + "0",  # odd
        (bytes(64) + (96).to_bytes(32, "big") + (1).to_bytes(32, "big")).hex() + "0g" * 32,
        (bytes(64) + (96).to_bytes(32, "big") + (300).to_bytes(32, "big")).hex() + "00" * 32,
        (bytes(64) + (64).to_bytes(32, "big") + bytes(32)).hex(),  # offset into the head
        "zz" * 128,
        " 1" + "0" * 254,  # a space in the head
        (bytes(64) + (96).to_bytes(32, "big")).hex() + " 1" + "0" * 62 + "12" * 32,
        (bytes(64) + (96).to_bytes(32, "big") + (1).to_bytes(32, "big")).hex() + " 1" * 32,
        (bytes(64) + (96).to_bytes(32, "big")).hex() + "-" + "0" * 62 + "1" + "00" * 32,
    ],
)
def test_decode_read_refuses_malformed_hex_text(text: str) -> None:
    with pytest.raises(DecodingError):
        decode_read(text)


@given(st.text(alphabet="0123456789abcdefABCDEF xg_-+", max_size=400))
def test_decode_read_of_any_text_answers_or_raises_decoding_error(text: str) -> None:
    try:
        decoded = decode_read(text)
    except DecodingError:
        return
    assert 64 * len(decoded.values) <= len(text)
