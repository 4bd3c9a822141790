"""Balances of many escrows in every asset of a chain, in one ``eth_call`` (``EscrowReader``).

The reader is a small contract without state, deployed like the factory through the
deterministic deployment proxy, so its address is the same on every chain
(``reader_address``). ``read(tokens, counts, accounts)`` reads each account in the token of
its group (the zero address is native coin), with the factory's isolation from hostile
tokens (a 30,000-gas ``staticcall`` per ``balanceOf``, ``UNREADABLE`` when it fails), and
answers the number and parent hash of the block it read. A pass over a chain with native and
token invoices is thus one call, not one per asset. Version 2 takes the accounts packed and
answers only the values that are not zero; a chain that holds only version 1 is read with it
(``chain.reader_codec``; ``find_reader`` says in one log line which version a chain uses).

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

from eth_abi.exceptions import DecodingError

from invoicing.chain.answers import RpcError
from invoicing.chain.artifacts import load_artifact
from invoicing.chain.evm import EvmClient
from invoicing.chain.reader_codec import READER, READER_V1, READERS, Group, ReaderVersion
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


def reader_address() -> str:
    """The address of the EscrowReader ``invoicing deploy`` deploys, the same on every
    chain."""
    return READER.address


async def find_reader(evm: EvmClient, chain_id: int) -> ReaderVersion | None:
    """The newest EscrowReader version the chain holds at its address (one log line says
    which), else None (a node that refuses ``eth_getCode`` too): reads then go per token
    through the factory's ``balancesOf``."""
    for version in READERS:
        try:
            code = await evm.get_code(version.address)
        except RpcError:
            code = b""
        if not same_runtime_code(code, load_artifact(version.artifact)):
            continue
        if version is READER:
            log.info("chain %s reads escrows with the EscrowReader at %s", chain_id, READER.address)
        else:
            log.warning(
                "chain %s reads escrows with the previous EscrowReader (version %s) at %s: "
                "`invoicing deploy` deploys version %s at %s (a third of the bytes per read)",
                chain_id,
                version.version,
                version.address,
                READER.version,
                READER.address,
            )
        return version
    log.warning(
        "chain %s has no EscrowReader at %s (nor version %s at %s): escrow balances are read "
        "with one call per asset (`invoicing deploy` deploys it)",
        chain_id,
        READER.address,
        READER_V1.version,
        READER_V1.address,
    )
    return None


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


async def read_groups(
    evm: EvmClient,
    reader: ReaderVersion,
    groups: Sequence[Group],
    block: int,
    chain_id: int,
    budget: int = READ_GAS,
) -> list[list[int | None]]:
    """The values of ``groups`` (one list per group, in order) read by ``reader`` at
    ``block``: the calls of ``chunk_groups`` (``budget`` gas each) at once,
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
                raw = await evm.eth_call_text(
                    reader.address, reader.encode(rest), block, gas=READ_GAS
                )
                answer = reader.decode(raw, wanted)
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
    reader: ReaderVersion,
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
    first = chunks[0] if chunks else []
    try:
        raw = await evm.eth_call_text(reader.address, reader.encode(first), "latest", gas=READ_GAS)
        answer = reader.decode(raw, sum(len(accounts) for _, accounts in first))
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
