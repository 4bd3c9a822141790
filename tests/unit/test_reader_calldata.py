"""The EscrowReader's calldata and answers are written by hand; they must equal the ABI
encoding, of both versions. An answer comes from a node the service does not control: a
malformed one is a DecodingError (a ChainUnavailable for the read), never a crash or a value
the ABI would not give. Calls are cut by estimated gas, in order, and an answer cut short is
resumed."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import ESCROW_READER, ESCROW_READER_V1
from invoicing.chain.calldata import UNREADABLE
from invoicing.chain.evm import BlockRef, EvmClient
from invoicing.chain.reader import (
    CALL_GAS,
    account_gas,
    chunk_groups,
    read_groups,
    remaining,
)
from invoicing.chain.reader_codec import (
    READER,
    READER_V1,
    Group,
    decode_read,
    decode_read_v1,
    encode_read,
    encode_read_v1,
)
from invoicing.chain.rpc_body import HexData
from invoicing.errors import ChainUnavailable

A = "0x52908400098527886E0F7030069857D2E4169EE7"
B = "0x8617E340B3D01FA5F11F306F4090FD50E238070D"
C = "0xde709f2102306220921060314715629080e2fb77"
TOKEN = "0x27b1fdb04752bbc536007a920d24acb045561c26"
PARENT = bytes(range(32))
ANSWER = ["uint256", "bytes32", "uint256", "uint256[]"]
ANSWER_V1 = ["uint256", "bytes32", "uint256[]"]

addresses = st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex())
groups_strategy = st.lists(
    st.tuples(st.none() | addresses, st.lists(addresses, max_size=5)), max_size=4
)
balances = st.one_of(st.just(0), st.just(0), st.just(UNREADABLE), st.integers(0, 2**256 - 1))


def abi_read(groups: list[Group]) -> bytes:
    tokens = [token or ZERO_ADDRESS for token, _ in groups]
    counts = [len(accounts) for _, accounts in groups]
    packed = b"".join(bytes.fromhex(a[2:]) for _, group in groups for a in group)
    return encode_call(ESCROW_READER, "read", tokens, counts, packed)


def abi_read_v1(groups: list[Group]) -> bytes:
    tokens = [token or ZERO_ADDRESS for token, _ in groups]
    counts = [len(accounts) for _, accounts in groups]
    accounts = [account for _, group in groups for account in group]
    return encode_call(ESCROW_READER_V1, "read", tokens, counts, accounts)


def answer_of(block: int, values: list[int]) -> bytes:
    """What the reader answers for ``values`` (one per account read)."""
    pairs = [word for i, value in enumerate(values) if value for word in (i, value)]
    return encode(ANSWER, [block, PARENT, len(values), pairs])


def spread(values: list[int]) -> list[int | None]:
    return [None if value == UNREADABLE else value for value in values]


@pytest.mark.parametrize(
    "groups", [[(None, [A, B]), (TOKEN, [C])], [(TOKEN, [])], [], [(None, [A])]]
)
def test_encode_read_equals_the_abi_encoding(groups: list[Group]) -> None:
    assert encode_read(groups) == abi_read(groups)
    assert encode_read_v1(groups) == abi_read_v1(groups)


@given(groups_strategy)
def test_encode_read_equals_the_abi_encoding_for_any_groups(groups: list[Group]) -> None:
    assert encode_read(groups) == abi_read(groups)
    assert encode_read_v1(groups) == abi_read_v1(groups)


def test_an_escrow_costs_version_2_twenty_bytes_of_calldata() -> None:
    many = [(None, [A, B, C] * 96)]  # 5,760 bytes: whole words, no padding
    assert len(encode_read(many)) - len(encode_read([(None, [])])) == 20 * 288
    assert len(encode_read_v1(many)) - len(encode_read_v1([(None, [])])) == 32 * 288


@pytest.mark.parametrize("encoder", [encode_read, encode_read_v1])
def test_encode_read_refuses_an_address_that_is_not_20_bytes(encoder: Any) -> None:
    with pytest.raises(ValueError):
        encoder([(None, [A[:-2]])])


def test_decode_read_lays_the_named_values_out_per_account() -> None:
    answer = encode(ANSWER, [17, PARENT, 5, [1, 5, 3, UNREADABLE, 4, 2**255]])

    decoded = decode_read(answer, 6)

    assert (decoded.block, decoded.parent_hash) == (17, PARENT)
    assert decoded.values == [0, 5, 0, None, 2**255]


@given(st.integers(0, 2**64), st.lists(balances, max_size=40), st.integers(0, 5))
def test_decode_read_reads_any_answer_the_reader_gives(
    block: int, values: list[int], more_asked: int
) -> None:
    answer = answer_of(block, values)
    wanted = len(values) + more_asked

    for data in (answer, answer.hex(), answer.hex().upper()):
        decoded = decode_read(data, wanted)
        assert (decoded.block, decoded.parent_hash) == (block, PARENT)
        assert decoded.values == spread(values)


@given(st.integers(0, 2**64), st.lists(balances, max_size=8))
def test_decode_read_v1_reads_any_abi_answer(block: int, values: list[int]) -> None:
    answer = encode(ANSWER_V1, [block, PARENT, values])

    for data in (answer, answer.hex()):
        decoded = decode_read_v1(data, len(values))
        assert decoded.block == block
        assert decoded.values == spread(values)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes(159),
        answer_of(1, [0, 2, 3])[:-1],  # cut short
        encode(ANSWER, [1, PARENT, 4, [1, 2, 3]]),  # an odd number of words
        encode(ANSWER, [1, PARENT, 4, [2, 2, 1, 2]]),  # indexes out of order
        encode(ANSWER, [1, PARENT, 4, [1, 2, 1, 3]]),  # an index twice
        encode(ANSWER, [1, PARENT, 4, [4, 2]]),  # an index not below the count
        encode(ANSWER, [1, PARENT, 4, [1, 0]]),  # a zero named
        encode(ANSWER, [1, PARENT, 7, []]),  # more accounts read than asked (6)
        encode(ANSWER, [1, PARENT, 2**255, []]),  # a node's count of 2**255
        bytes(96) + (96).to_bytes(32, "big") + bytes(32),  # the offset points into the head
        bytes(96) + (129).to_bytes(32, "big") + bytes(64),  # not word-aligned
        bytes(96) + (2**250).to_bytes(32, "big") + bytes(32),  # past the end
        bytes(96) + (128).to_bytes(32, "big") + (2**250).to_bytes(32, "big"),  # a long array
    ],
)
def test_decode_read_refuses_a_malformed_answer(data: bytes) -> None:
    for form in (data, data.hex()):
        with pytest.raises(DecodingError):
            decode_read(form, 6)


@pytest.mark.parametrize(
    "text",
    [
        "0" * 319,  # not whole bytes
        answer_of(1, [2]).hex()[:-2] + "zz",
        " 1" + answer_of(1, [2]).hex()[2:],  # a space
        answer_of(1, [2]).hex()[:-2] + " 2",
        "0x" + answer_of(1, [2]).hex(),  # the node's 0x is taken off before
    ],
)
def test_decode_read_refuses_malformed_hex_text(text: str) -> None:
    with pytest.raises(DecodingError):
        decode_read(text, 6)


def abi_reading(data: bytes) -> tuple[int, bytes, list[int | None]]:
    """What the ABI makes of an answer: the values laid out per account read."""
    block, parent, count, pairs = decode(ANSWER, data)
    values: list[int | None] = [0] * count
    for index, value in zip(pairs[::2], pairs[1::2], strict=True):
        values[index] = None if value == UNREADABLE else value
    return block, parent, values


@settings(max_examples=300)
@given(
    st.lists(balances, max_size=12),
    st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=4),
    st.integers(0, 400),
)
def test_a_tampered_answer_is_refused_or_reads_as_the_abi_reads_it(
    values: list[int], flips: list[tuple[int, int]], cut: int
) -> None:
    """A node's answer with any bytes changed or cut: a DecodingError, or the values the ABI
    decodes from it (never a crash, never a value the answer does not say)."""
    data = bytearray(answer_of(9, values))
    for at, byte in flips:
        if at < len(data):
            data[at] = byte
    tampered = bytes(data[: len(data) - cut] if cut < len(data) else data)
    for form in (tampered, tampered.hex()):
        try:
            decoded = decode_read(form, 12)
        except DecodingError:
            continue
        assert len(decoded.values) <= 12
        assert (decoded.block, decoded.parent_hash, decoded.values) == abi_reading(tampered)


@given(st.binary(max_size=400), st.integers(0, 20))
def test_decode_read_of_any_bytes_answers_or_raises_decoding_error(
    data: bytes, wanted: int
) -> None:
    for decoder in (decode_read, decode_read_v1):
        try:
            decoded = decoder(data, wanted)
        except DecodingError:
            continue
        assert len(decoded.values) <= wanted


@given(st.text(alphabet="0123456789abcdefABCDEF xg_-+", max_size=500), st.integers(0, 20))
def test_decode_read_of_any_text_answers_or_raises_decoding_error(text: str, wanted: int) -> None:
    for decoder in (decode_read, decode_read_v1):
        try:
            decoded = decoder(text, wanted)
        except DecodingError:
            continue
        assert len(decoded.values) <= wanted


class AnsweringNode(EvmClient):
    """A node that answers every ``eth_call`` with ``text`` (its hex, without 0x)."""

    def __init__(self, text: str) -> None:
        super().__init__(EvmClient.connect("http://127.0.0.1:9").rpc)
        self.text = text
        self.calls = 0

    async def eth_call_text(
        self,
        to: str,
        data: bytes | HexData,
        block: BlockRef = "latest",
        from_: str | None = None,
        value: int = 0,
        gas: int | None = None,
    ) -> str:
        self.calls += 1
        return self.text


@settings(max_examples=150)
@given(st.binary(max_size=300) | st.lists(balances, max_size=6).map(lambda v: answer_of(7, v)))
async def test_a_read_of_any_answer_is_the_values_or_chain_unavailable(data: bytes) -> None:
    node = AnsweringNode(data.hex())
    groups: list[Group] = [(None, [A, B]), (TOKEN, [C])]
    try:
        values = await read_groups(node, READER, groups, 7, 1)
    except ChainUnavailable:
        return
    # Each call was given the same answer: the values are its values, read on from the
    # next account while it says fewer were read than asked.
    block, _parent, said = abi_reading(data)
    flat = values[0] + values[1]
    assert block == 7 and len(flat) == 3
    for start in range(0, len(flat), len(said)):
        assert flat[start : start + len(said)] == said[: len(flat) - start]


async def test_a_read_with_a_count_past_the_accounts_asked_is_chain_unavailable() -> None:
    node = AnsweringNode(encode(ANSWER, [7, PARENT, 2**70, []]).hex())
    with pytest.raises(ChainUnavailable):
        await read_groups(node, READER, [(None, [A, B])], 7, 1)
    assert node.calls == 1


async def test_a_short_answer_is_read_on_from_the_next_account() -> None:
    node = AnsweringNode(answer_of(7, [0, 3]).hex())
    # Every call answers two accounts: four asked take two calls.
    assert await read_groups(node, READER, [(None, [A, B]), (TOKEN, [C, A])], 7, 1) == [
        [0, 3],
        [0, 3],
    ]
    assert node.calls == 2


def test_the_versions_have_their_own_addresses() -> None:
    assert READER.address != READER_V1.address
    assert (READER.version, READER_V1.version) == (2, 1)


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


@settings(deadline=None)
@given(
    st.integers(0, 2**64),
    st.lists(balances, max_size=8),
    st.integers(0, 600),
    st.integers(0, 300),
)
def test_decode_read_v1_of_the_hex_text_answers_as_of_the_bytes(
    block: int, values: list[int], zeros_before: int, zeros_after: int
) -> None:
    """Runs of zero words (compared in the text, 256 words at a time) around any values."""
    laid = [0] * zeros_before + values + [0] * zeros_after
    answer = encode(ANSWER_V1, [block, PARENT, laid])

    assert decode_read_v1(answer.hex(), len(laid)) == decode_read_v1(answer, len(laid))
    assert decode_read_v1(answer.hex().upper(), len(laid)) == decode_read_v1(answer, len(laid))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0" * 255,
        encode(ANSWER_V1, [1, PARENT, [1, 2]]).hex()[:-2],  # short
        encode(ANSWER_V1, [1, PARENT, [1, 2]]).hex() + "0",  # odd
        encode(ANSWER_V1, [1, PARENT, [1, 2, 3]]).hex(),  # more values than asked (2)
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
def test_decode_read_v1_refuses_malformed_hex_text(text: str) -> None:
    with pytest.raises(DecodingError):
        decode_read_v1(text, 2)
