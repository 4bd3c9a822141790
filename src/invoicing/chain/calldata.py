"""Calldata of the factory calls the service sends, and the hand-written balancesOf.

Sends (withdraw, setFeeMeta, setPayoutMeta, refundMeta) are encoded from the shipped ABI.
balancesOf is written out by hand: a monitor pass encodes every watched escrow, and eth_abi's
per-address validation (an EIP-55 keccak for each checksummed address) cost seconds per 100k.
``tests/unit/test_balances_calldata.py`` pins it to the ABI encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from eth_abi.exceptions import DecodingError

from invoicing.addresses import address_bytes
from invoicing.chain.abi import abi_function, encode_call
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.escrows import salt_bytes

# PaymentFactory.MAX_FEE_BPS: the highest fee an owner may set (5%).
MAX_FEE_BPS = 500
# PaymentFactory.UNREADABLE: balancesOf's answer for an account whose token balance could not
# be read (the token's balanceOf failed, ran out of its 30k gas stipend or answered fewer than
# 32 bytes). A token answering this very value reads as unreadable too; 2**255 reads as is.
UNREADABLE = 2**256 - 1


def encode_withdraw(owner: str, token: str, salts: Sequence[bytes]) -> bytes:
    """withdraw(owner, token, salts): token = ZERO_ADDRESS sweeps native coin."""
    salt_list = [salt_bytes(s) for s in salts]
    return encode_call(PAYMENT_FACTORY, "withdraw", owner, token, salt_list)


def encode_set_fee_meta(
    user: str, fee_bps: int, nonce: int, deadline: int, signature: bytes
) -> bytes:
    """setFeeMeta: an owner-signed SetFee, relayed by anyone."""
    return encode_call(PAYMENT_FACTORY, "setFeeMeta", user, fee_bps, nonce, deadline, signature)


def encode_set_payout_meta(
    user: str, payout: str, nonce: int, deadline: int, signature: bytes
) -> bytes:
    """setPayoutMeta: an owner-signed SetPayout, relayed by anyone."""
    return encode_call(PAYMENT_FACTORY, "setPayoutMeta", user, payout, nonce, deadline, signature)


def encode_set_refund_delegate_meta(
    user: str, delegate: str, nonce: int, deadline: int, signature: bytes
) -> bytes:
    """setRefundDelegateMeta: an owner-signed SetRefundDelegate, relayed by anyone."""
    return encode_call(
        PAYMENT_FACTORY, "setRefundDelegateMeta", user, delegate, nonce, deadline, signature
    )


def encode_refund_meta(
    user: str,
    salt: bytes,
    token: str,
    to: str,
    amount: int,
    nonce: int,
    deadline: int,
    signature: bytes,
) -> bytes:
    """refundMeta: an owner-signed Refund of ``amount`` of ``token`` (ZERO_ADDRESS = native)
    from the escrow of ``salt`` to ``to``, relayed by anyone."""
    return encode_call(
        PAYMENT_FACTORY,
        "refundMeta",
        user,
        salt_bytes(salt),
        token,
        to,
        amount,
        nonce,
        deadline,
        signature,
    )


def encode_balances_of(token: str, accounts: Sequence[str]) -> bytes:
    """balancesOf(token, accounts): token = ZERO_ADDRESS reads native balances.

    Selector, token word, offset 64, length, one word per account. Addresses must be 20
    bytes of hex; their checksum case is not verified (they are the service's own escrows)."""
    head = [
        _BALANCES_OF_SELECTOR,
        bytes(12) + address_bytes(token),
        _BALANCES_OF_OFFSET,
        len(accounts).to_bytes(32, "big"),
    ]
    # One hex decode for every account (thousands per call): each is padded to a word.
    digits = "".join([_WORD_PAD + account.removeprefix("0x") for account in accounts])
    words = bytes.fromhex(digits)
    if len(words) != 32 * len(accounts):
        raise ValueError("balancesOf accounts must be 20-byte hex addresses")
    return b"".join(head) + words


_BALANCES_OF_SELECTOR = abi_function(PAYMENT_FACTORY, "balancesOf").selector
_BALANCES_OF_OFFSET = (64).to_bytes(32, "big")
_WORD_PAD = "00" * 12


def decode_balances_of(data: bytes) -> list[int | None]:
    """Answer of balancesOf: a ``uint256[]`` (read by hand, like the calldata), with None for
    ``UNREADABLE``. The factory answers fewer values than accounts asked for when the call's
    gas ran low; the caller reads the rest again (``EvmGateway.balances``)."""
    if len(data) < 64:
        raise DecodingError(f"balancesOf answer too short: {len(data)} bytes")
    return decode_balance_array(data, 1, "balancesOf")


def decode_balance_array(data: bytes, head_words: int, what: str) -> list[int | None]:
    """The ``uint256[]`` of an ABI answer whose head is ``head_words`` words, the last one its
    offset, with None for ``UNREADABLE``; DecodingError when it is malformed."""
    head = 32 * head_words
    offset = int.from_bytes(data[head - 32 : head], "big")
    if offset % 32 or offset < head or offset + 32 > len(data):
        raise DecodingError(f"{what} answer has a bad array offset {offset}")
    start = offset + 32
    end = start + 32 * int.from_bytes(data[offset:start], "big")
    if end > len(data):
        raise DecodingError(f"{what} answer is shorter than its array")
    unreadable = _UNREADABLE_WORD
    values: list[int | None] = []
    # Almost every escrow of a pass reads zero: a run of zero words is decided in C.
    for run in range(start, end, _RUN):
        stop = min(end, run + _RUN)
        if data[run:stop] == _ZERO_RUN[: stop - run]:
            values += _ZEROS[: (stop - run) // 32]
            continue
        values += [
            None if (word := data[i : i + 32]) == unreadable else int.from_bytes(word, "big")
            for i in range(run, stop, 32)
        ]
    return values


def decode_balance_text(text: str, head_words: int, what: str) -> list[int | None]:
    """``decode_balance_array`` of an answer as the node sent it, hex text without ``0x``:
    a run of zero words is compared in the text, so most of a pass's answers are never
    decoded from hex (``bytes.fromhex`` of every answer was a sixth of a pass's CPU)."""
    if len(text) % 2 or len(text) < 64 * head_words + 64:
        raise DecodingError(f"{what} answer is not whole bytes of hex or too short")
    try:
        offset = _text_word(text, head_words - 1, what)
        if offset % 32 or offset < 32 * head_words or 2 * offset + 64 > len(text):
            raise DecodingError(f"{what} answer has a bad array offset {offset}")
        start = offset + 32
        end = start + 32 * _text_word(text, offset // 32, what)
        if 2 * end > len(text):
            raise DecodingError(f"{what} answer is shorter than its array")
        values: list[int | None] = []
        for run in range(start, end, _RUN):
            stop = min(end, run + _RUN)
            zeros = _ZERO_TEXT if stop - run == _RUN else _ZERO_TEXT[: 2 * (stop - run)]
            if text.startswith(zeros, 2 * run):  # compared in place, no copy
                values += _ZEROS[: (stop - run) // 32]
                continue
            words = bytes.fromhex(text[2 * run : 2 * stop])
            if len(words) != stop - run:  # fromhex passes over spaces
                raise DecodingError(f"{what} answer is not hex")
            values += [
                None if (word := words[i : i + 32]) == _UNREADABLE_WORD else int.from_bytes(word)
                for i in range(0, len(words), 32)
            ]
    except ValueError as exc:  # not hex
        raise DecodingError(f"{what} answer is not hex") from exc
    return values


def _text_word(text: str, index: int, what: str) -> int:
    """Word ``index`` of a hex answer (ValueError when it is not hex)."""
    word = bytes.fromhex(text[64 * index : 64 * index + 64])
    if len(word) != 32:
        raise DecodingError(f"{what} answer is not hex")
    return int.from_bytes(word, "big")


class PackedAccounts(Sequence[str]):
    """Addresses held packed, 20 bytes each, one after the other: what the EscrowReader's
    calldata carries (``chain.reader_codec``), copied into it without a step per address. A
    monitor worker keeps its watched escrows this way (``monitor.watched``); an address read
    out of it is lower-case hex."""

    __slots__ = ("packed",)

    def __init__(self, packed: bytes | bytearray) -> None:
        self.packed = packed

    def __len__(self) -> int:
        return len(self.packed) // 20

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> PackedAccounts: ...

    def __getitem__(self, index: int | slice) -> str | PackedAccounts:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("PackedAccounts slices are contiguous")
            return PackedAccounts(self.packed[20 * start : 20 * max(start, stop)])
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return "0x" + self.packed[20 * index : 20 * index + 20].hex()

    def words(self) -> bytes:
        """The addresses as 32-byte ABI words (the previous reader's and ``balancesOf``'s
        calldata): byte ``j`` of every address copied at once (a strided slice), 20 copies
        in all, not a step per address."""
        count = len(self)
        words = bytearray(32 * count)
        for j in range(20):
            words[12 + j :: 32] = self.packed[j : 20 * count : 20]
        return bytes(words)


_UNREADABLE_WORD = UNREADABLE.to_bytes(32, "big")
# Words of an answer compared at once with zeros (``decode_balance_array``).
_RUN = 32 * 256
_ZERO_RUN = bytes(_RUN)
_ZEROS: list[int | None] = [0] * (_RUN // 32)
_ZERO_TEXT = "0" * (2 * _RUN)
