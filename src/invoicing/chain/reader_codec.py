"""The EscrowReader's calldata and answers, of both versions, written by hand (a monitor pass
encodes every watched escrow and decodes an answer per call).

- **Version 2** (``contracts/EscrowReader.sol``, what ``invoicing deploy`` deploys):
  ``read(address[] tokens, uint256[] counts, bytes accounts)`` takes the accounts packed, 20
  bytes each, and answers ``(uint256 block, bytes32 parentHash, uint256 count, uint256[]
  found)``: how many accounts it read, and for those of them whose value is not zero, pairs of
  (index, value). An escrow costs a read 40 hex characters of calldata, and nothing in the
  answer while it holds nothing.
- **Version 1** (``contracts/previous/EscrowReaderV1.sol``): the accounts as 32-byte words,
  and one 32-byte value per account read; kept for chains that hold it and not version 2.

Each version's ``decode`` turns an answer (its bytes, or its hex text as the node sent it,
without ``0x``) into a ``ReaderAnswer`` with one value per account read, or raises
DecodingError: an answer comes from a node the service does not control, so it is checked
(counts, offsets, indexes in order and below the count, no more values than asked) before a
value is taken from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from eth_abi.exceptions import DecodingError

from invoicing.addresses import ZERO_ADDRESS, address_bytes
from invoicing.chain.abi import abi_function
from invoicing.chain.artifacts import ESCROW_READER, ESCROW_READER_V1, load_artifact
from invoicing.chain.calldata import (
    UNREADABLE,
    PackedAccounts,
    decode_balance_array,
    decode_balance_text,
)
from invoicing.chain.deploy import deterministic_address

# One group of a read: a token (None = native coin) and the escrows to read in it.
Group = tuple[str | None, Sequence[str]]


@dataclass(frozen=True)
class ReaderAnswer:
    """One ``read`` call's answer: the block it read, its parent's hash, and one value per
    account read (None = unreadable), fewer than asked when the call's gas ran low."""

    block: int
    parent_hash: bytes
    values: list[int | None]


def _total(groups: Sequence[Group]) -> int:
    return sum(len(accounts) for _, accounts in groups)


def _encode(selector: bytes, groups: Sequence[Group], accounts: list[bytes]) -> bytes:
    """``selector``'s ``read(tokens, counts, accounts)`` calldata: the groups' tokens and
    counts as two arrays, then ``accounts`` (its length word and data), after the three
    offsets."""
    tokens = [bytes(12) + address_bytes(token or ZERO_ADDRESS) for token, _ in groups]
    counts = [len(accounts).to_bytes(32, "big") for _, accounts in groups]
    tokens_at = 96
    counts_at = tokens_at + 32 * (1 + len(groups))
    accounts_at = counts_at + 32 * (1 + len(groups))
    return b"".join(
        [
            selector,
            tokens_at.to_bytes(32, "big"),
            counts_at.to_bytes(32, "big"),
            accounts_at.to_bytes(32, "big"),
            len(groups).to_bytes(32, "big"),
            *tokens,
            len(groups).to_bytes(32, "big"),
            *counts,
            *accounts,
        ]
    )


def _packed(accounts: Sequence[str]) -> bytes | bytearray:
    """The accounts packed, 20 bytes each; those of ``PackedAccounts`` as they are held."""
    if isinstance(accounts, PackedAccounts):
        return accounts.packed
    return bytes.fromhex("".join([account.removeprefix("0x") for account in accounts]))


def encode_read(groups: Sequence[Group]) -> bytes:
    """Version 2's ``read(tokens, counts, accounts)``: two arrays and the packed accounts
    (``bytes``, padded to a whole word), after their offsets."""
    packed = b"".join(_packed(accounts) for _, accounts in groups)
    if len(packed) != 20 * _total(groups):
        raise ValueError("read accounts must be 20-byte hex addresses")
    tail = [len(packed).to_bytes(32, "big"), packed, bytes(-len(packed) % 32)]
    return _encode(_READ_SELECTOR, groups, tail)


def decode_read(data: bytes | str, wanted: int) -> ReaderAnswer:
    """Version 2's answer for ``wanted`` accounts: ``(uint256, bytes32, uint256, uint256[])``
    read by hand, the pairs laid out as one value per account read (zero where none is
    named, None for ``UNREADABLE``). DecodingError when it is malformed: not hex, a bad
    offset or length, more accounts read than ``wanted``, an odd number of words in the
    pairs, an index out of order or not below the count, or a zero named."""
    if isinstance(data, str):
        try:
            raw = bytes.fromhex(data)
        except ValueError as exc:
            raise DecodingError("read answer is not hex") from exc
        if 2 * len(raw) != len(data):  # fromhex passes over spaces
            raise DecodingError("read answer is not hex")
        data = raw
    if len(data) < 160:
        raise DecodingError(f"read answer too short: {len(data)} bytes")
    count = int.from_bytes(data[64:96], "big")
    offset = int.from_bytes(data[96:128], "big")
    if count > wanted:
        raise DecodingError(f"read answer has {count} accounts read of {wanted} asked")
    if offset % 32 or offset < 128 or offset + 32 > len(data):
        raise DecodingError(f"read answer has a bad array offset {offset}")
    length = int.from_bytes(data[offset : offset + 32], "big")
    start = offset + 32
    if length % 2 or start + 32 * length > len(data):
        raise DecodingError("read answer's pairs are cut short")
    values: list[int | None] = [0] * count
    last = -1
    for at in range(start, start + 32 * length, 64):
        index = int.from_bytes(data[at : at + 32], "big")
        word = data[at + 32 : at + 64]
        if index <= last or index >= count or word == _ZERO_WORD:
            raise DecodingError(f"read answer names account {index} out of order or as zero")
        values[index] = None if word == _UNREADABLE_WORD else int.from_bytes(word, "big")
        last = index
    return ReaderAnswer(int.from_bytes(data[:32], "big"), data[32:64], values)


def encode_read_v1(groups: Sequence[Group]) -> bytes:
    """Version 1's ``read(tokens, counts, accounts)``: three dynamic arrays after their
    offsets, the accounts as 32-byte words."""
    total = _total(groups)
    words = b"".join(_words(accounts) for _, accounts in groups)
    if len(words) != 32 * total:
        raise ValueError("read accounts must be 20-byte hex addresses")
    return _encode(_READ_V1_SELECTOR, groups, [total.to_bytes(32, "big"), words])


def _words(accounts: Sequence[str]) -> bytes:
    if isinstance(accounts, PackedAccounts):
        return accounts.words()
    return bytes.fromhex("".join([_WORD_PAD + account.removeprefix("0x") for account in accounts]))


def decode_read_v1(data: bytes | str, wanted: int) -> ReaderAnswer:
    """Version 1's answer: ``(uint256, bytes32, uint256[])`` read by hand, with None for
    ``UNREADABLE``; DecodingError when it is malformed or holds more than ``wanted``
    values."""
    if isinstance(data, str):
        values = decode_balance_text(data, 3, "read")
        try:
            head = bytes.fromhex(data[:128])
        except ValueError as exc:
            raise DecodingError("read answer is not hex") from exc
        if len(head) != 64:
            raise DecodingError("read answer is not hex")
        answer = ReaderAnswer(int.from_bytes(head[:32], "big"), head[32:64], values)
    else:
        if len(data) < 128:
            raise DecodingError(f"read answer too short: {len(data)} bytes")
        values = decode_balance_array(data, 3, "read")
        answer = ReaderAnswer(int.from_bytes(data[:32], "big"), data[32:64], values)
    if len(answer.values) > wanted:
        raise DecodingError(f"read answer has {len(answer.values)} values for {wanted} asked")
    return answer


@dataclass(frozen=True)
class ReaderVersion:
    """One EscrowReader version: its artifact (and so its address, the same on every chain),
    and how its calls are written and its answers read."""

    artifact: str
    version: int
    encode: Callable[[Sequence[Group]], bytes]
    decode: Callable[[bytes | str, int], ReaderAnswer]

    @cached_property
    def address(self) -> str:
        return deterministic_address(load_artifact(self.artifact).bytecode)


READER = ReaderVersion(ESCROW_READER, 2, encode_read, decode_read)
READER_V1 = ReaderVersion(ESCROW_READER_V1, 1, encode_read_v1, decode_read_v1)
# Newest first: a chain is read with the newest it holds.
READERS = (READER, READER_V1)

_READ_SELECTOR = abi_function(ESCROW_READER, "read").selector
_READ_V1_SELECTOR = abi_function(ESCROW_READER_V1, "read").selector
_WORD_PAD = "00" * 12
_ZERO_WORD = bytes(32)
_UNREADABLE_WORD = UNREADABLE.to_bytes(32, "big")
