"""Balances of many escrows in every asset of a chain, in one ``eth_call`` (``EscrowReader``).

The reader is a small contract without state, deployed like the factory through the
deterministic deployment proxy, so its address is the same on every chain
(``reader_address``). ``read(tokens, counts, accounts)`` reads each account in the token of
its group (the zero address is native coin), with the factory's isolation from hostile
tokens (a 30,000-gas ``staticcall`` per ``balanceOf``, ``UNREADABLE`` when it fails), and
answers the number and parent hash of the block it read. A pass over a chain with native and
token invoices is thus one call, not one per asset.

Calls are sized by a gas estimate, not a count of accounts: a chunk holds the accounts whose
estimated cost (calldata and the read itself, a cold account each) fits ``READ_GAS``, the
gas the service asks each call for. A node whose ``eth_call`` cap is lower, or a token that
spends its whole stipend on every account, makes the reader stop early: its answer is
shorter, and the rest is read in another call at the same block. Every answer must be at the
block asked for, and all the calls of one read must see the same parent hash, else the read
fails (``ChainUnavailable``) and the pass is retried: a reading is never a mix of two forks.

Why not a "deployless" read (an ``eth_call`` without ``to`` whose data is the reader's
creation code, answering from its constructor)? A creation's data is its whole input, and
nodes apply the init-code limit of EIP-3860 to it in ``eth_call`` too (49,152 bytes: about
2,400 escrows), and the code-size limit of EIP-170 to its answer (24,576 bytes: 760
balances). Ten thousand escrows would take many calls per block.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from eth_abi.exceptions import DecodingError

from invoicing.addresses import ZERO_ADDRESS, address_bytes
from invoicing.chain.abi import abi_function
from invoicing.chain.answers import RpcError
from invoicing.chain.artifacts import ESCROW_READER, load_artifact
from invoicing.chain.calldata import AccountWords, decode_balance_array, decode_balance_text
from invoicing.chain.deploy import deterministic_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.versions import same_runtime_code
from invoicing.errors import ChainUnavailable

log = logging.getLogger(__name__)

# Gas asked for each read: go-ethereum's default eth_call cap (``RPCGasCap``, 50,000,000).
# A node that allows less runs the call with its own cap; the reader then answers fewer
# values and the rest is read in another call.
READ_GAS = 50_000_000
# What a call costs besides its accounts: the transaction, the group headers, the answer.
CALL_GAS = 60_000
# Per account, calldata (12 zero and 20 non-zero bytes, EIP-2028) and the answer's memory.
ACCOUNT_CALLDATA_GAS = 12 * 4 + 20 * 16 + 16
# Per account, the read: a cold BALANCE (2,600), or a cold token call with the token's own
# cold storage read (2,600 + 2,100 + the token's code), plus the loop.
NATIVE_ACCOUNT_GAS = 2_700
TOKEN_ACCOUNT_GAS = 5_500

# One group of a read: a token (None = native coin) and the escrows to read in it.
Group = tuple[str | None, Sequence[str]]


@dataclass(frozen=True)
class ReaderAnswer:
    """One ``read`` call's answer: the block it read, its parent's hash, and one value per
    account read (None = unreadable), fewer than asked when the call's gas ran low."""

    block: int
    parent_hash: bytes
    values: list[int | None]


def reader_address() -> str:
    """The EscrowReader address of the shipped artifact, the same on every chain."""
    return deterministic_address(load_artifact(ESCROW_READER).bytecode)


async def find_reader(evm: EvmClient, chain_id: int) -> str:
    """The reader's address when the chain holds the shipped reader there, else "" (a node
    that refuses ``eth_getCode`` too, said in one log line): reads then go per token through
    the factory's ``balancesOf``."""
    try:
        code = await evm.get_code(reader_address())
    except RpcError:
        code = b""
    if same_runtime_code(code, load_artifact(ESCROW_READER)):
        return reader_address()
    log.warning(
        "chain %s has no EscrowReader at %s: escrow balances are read with one call per asset "
        "(`invoicing deploy` deploys it)",
        chain_id,
        reader_address(),
    )
    return ""


def account_gas(token: str | None) -> int:
    """The estimated gas of reading one escrow in ``token`` (None = native coin)."""
    return ACCOUNT_CALLDATA_GAS + (NATIVE_ACCOUNT_GAS if token is None else TOKEN_ACCOUNT_GAS)


# How many times a read answered at another block than asked is asked again before it fails.
ASK_AGAIN = 2


def chunk_groups(groups: Sequence[Group], budget: int = READ_GAS) -> list[list[Group]]:
    """``groups`` cut into calls whose estimated gas fits ``budget``, in order (each call
    holds at least one account)."""
    calls: list[list[Group]] = []
    current: list[Group] = []
    left = budget - CALL_GAS
    for token, accounts in groups:
        cost = account_gas(token)
        start = 0
        while start < len(accounts):
            room = max(0, left // cost)
            if room == 0 and current:
                calls.append(current)
                current, left = [], budget - CALL_GAS
                continue
            part = accounts[start : start + max(1, room)]
            current.append((token, part))
            left -= len(part) * cost
            start += len(part)
    if current:
        calls.append(current)
    return calls


def encode_read(groups: Sequence[Group]) -> bytes:
    """``read(tokens, counts, accounts)`` calldata, written by hand like ``balancesOf``'s (a
    pass encodes every watched escrow): three dynamic arrays after their offsets."""
    tokens = [bytes(12) + address_bytes(token or ZERO_ADDRESS) for token, _ in groups]
    counts = [len(accounts).to_bytes(32, "big") for _, accounts in groups]
    words = b"".join(_words(accounts) for _, accounts in groups)
    total = sum(len(accounts) for _, accounts in groups)
    if len(words) != 32 * total:
        raise ValueError("read accounts must be 20-byte hex addresses")
    tokens_at = 96
    counts_at = tokens_at + 32 * (1 + len(groups))
    accounts_at = counts_at + 32 * (1 + len(groups))
    return b"".join(
        [
            _READ_SELECTOR,
            tokens_at.to_bytes(32, "big"),
            counts_at.to_bytes(32, "big"),
            accounts_at.to_bytes(32, "big"),
            len(groups).to_bytes(32, "big"),
            *tokens,
            len(groups).to_bytes(32, "big"),
            *counts,
            total.to_bytes(32, "big"),
            words,
        ]
    )


def _words(accounts: Sequence[str]) -> bytes | bytearray:
    """The accounts' ABI words; those of ``AccountWords`` as they are held."""
    if isinstance(accounts, AccountWords):
        return accounts.words
    return bytes.fromhex("".join([_WORD_PAD + account.removeprefix("0x") for account in accounts]))


def decode_read(data: bytes | str) -> ReaderAnswer:
    """The answer of ``read``: ``(uint256, bytes32, uint256[])`` read by hand, with None for
    ``UNREADABLE``; DecodingError when it is malformed. ``data`` is the answer's bytes, or
    its hex text as the node sent it (without ``0x``, ``EvmClient.eth_call_text``)."""
    if isinstance(data, str):
        values = decode_balance_text(data, 3, "read")
        try:
            head = bytes.fromhex(data[:128])
        except ValueError as exc:
            raise DecodingError("read answer is not hex") from exc
        if len(head) != 64:
            raise DecodingError("read answer is not hex")
        return ReaderAnswer(int.from_bytes(head[:32], "big"), head[32:64], values)
    if len(data) < 128:
        raise DecodingError(f"read answer too short: {len(data)} bytes")
    values = decode_balance_array(data, 3, "read")
    return ReaderAnswer(int.from_bytes(data[:32], "big"), data[32:64], values)


async def read_groups(
    evm: EvmClient,
    reader: str,
    groups: Sequence[Group],
    block: int,
    chain_id: int,
    budget: int = READ_GAS,
) -> list[list[int | None]]:
    """The values of ``groups`` (one list per group, in order) read by the reader at
    ``reader`` at ``block``: the calls of ``chunk_groups`` (``budget`` gas each) at once,
    each continued at the same block while its answers are cut short. ChainUnavailable when
    a call fails, answers malformed, at another block (after ``ASK_AGAIN`` more tries), or
    with another parent hash than the others."""
    parents: set[bytes] = set()

    async def call(chunk: list[Group]) -> list[int | None]:
        values: list[int | None] = []
        rest = chunk
        asked_again = 0
        while rest:
            wanted = sum(len(accounts) for _, accounts in rest)
            try:
                raw = await evm.eth_call_text(reader, encode_read(rest), block, gas=READ_GAS)
                answer = decode_read(raw)
            except (RpcError, DecodingError) as exc:
                raise ChainUnavailable(f"escrow read failed on chain {chain_id}") from exc
            if answer.block != block and asked_again < ASK_AGAIN:
                # A node that mines a block while it answers may run a call for its newest
                # block on the next one (anvil does). Asked again, that block is history.
                asked_again += 1
                continue
            if answer.block != block or not answer.values or len(answer.values) > wanted:
                raise ChainUnavailable(
                    f"escrow read on chain {chain_id} answered {len(answer.values)} values for "
                    f"{wanted} at block {answer.block}, asked at {block}"
                )
            parents.add(answer.parent_hash)
            if len(parents) > 1:
                raise ChainUnavailable(
                    f"escrow reads on chain {chain_id} at block {block} saw two parent blocks"
                )
            values.extend(answer.values)
            rest = remaining(rest, len(answer.values))
        return values

    chunks = chunk_groups(groups, budget)
    if len(chunks) == 1:  # the usual case: one call, no task to schedule
        parts = [await call(chunks[0])]
    else:
        parts = await asyncio.gather(*(call(chunk) for chunk in chunks))
    return by_group(groups, parts[0] if len(parts) == 1 else list(itertools.chain(*parts)))


async def read_groups_at_head(
    evm: EvmClient,
    reader: str,
    groups: Sequence[Group],
    chain_id: int,
    floor: int = 0,
    budget: int = READ_GAS,
) -> tuple[int, list[list[int | None]]]:
    """The node's newest block and the values of ``groups`` there: one call for the newest
    block, whose answer names it. When that answer does not hold every value (more than one
    call's gas, or cut short), or names a block below ``floor`` (a lagging URL behind a head
    already seen), the values are read by ``read_groups`` at the higher block."""
    chunks = chunk_groups(groups, budget)
    try:
        raw = await evm.eth_call_text(
            reader, encode_read(chunks[0] if chunks else []), "latest", gas=READ_GAS
        )
        answer = decode_read(raw)
    except (RpcError, DecodingError) as exc:
        raise ChainUnavailable(f"escrow read failed on chain {chain_id}") from exc
    wanted = sum(len(accounts) for _, accounts in groups)
    if answer.block >= floor and len(answer.values) == wanted:
        return answer.block, by_group(groups, answer.values)
    block = max(answer.block, floor)
    return block, await read_groups(evm, reader, groups, block, chain_id, budget)


def by_group(groups: Sequence[Group], flat: Sequence[int | None]) -> list[list[int | None]]:
    """``flat`` (the values of every account of ``groups``, in order) cut into one list per
    group."""
    ends = list(itertools.accumulate(len(accounts) for _, accounts in groups))
    sizes = [len(accounts) for _, accounts in groups]
    return [list(flat[end - size : end]) for size, end in zip(sizes, ends, strict=True)]


def remaining(groups: Sequence[Group], answered: int) -> list[Group]:
    """The groups without their first ``answered`` accounts (an answer cut short by gas)."""
    rest: list[Group] = []
    for token, accounts in groups:
        if answered >= len(accounts):
            answered -= len(accounts)
            continue
        rest.append((token, accounts[answered:]))
        answered = 0
    return rest


_READ_SELECTOR = abi_function(ESCROW_READER, "read").selector
_WORD_PAD = "00" * 12
