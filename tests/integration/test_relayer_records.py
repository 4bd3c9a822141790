"""The relayer and its tracker on FakeChain and a real database (no node): a transaction is
recorded before it is broadcast, replaced with raised fees, re-sent, confirmed or dropped."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from eth_account import Account
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.fake import FakeChain
from invoicing.chain.gateway import ChainRegistry
from invoicing.chain.rpc import RpcError
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.hashing import keccak256
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.models import RelayerTransaction, TxPurpose, TxStatus
from invoicing.settlement.relayer import Call, Relayer, bump
from invoicing.settlement.tracking import track_pending

pytestmark = pytest.mark.integration

# The database is shared with the anvil tests: each test relays on a chain id of its own.
_chain_ids = itertools.count(7_000_000 + int.from_bytes(os.urandom(2), "big") * 100)
CALL = Call(TxPurpose.SET_FEE, "0x" + "ab" * 20, b"\x12\x34")
GAS = 60_000
RESEND_AFTER_S = 60


@dataclass
class Sending:
    services: Services
    chain: FakeChain
    clock: FakeClock
    relayer: Relayer


@pytest.fixture
async def sending(database_url: str) -> AsyncIterator[Sending]:
    key = "0x" + bytes(Account.create().key).hex()
    chain = FakeChain(chain_id=next(_chain_ids), relayer_key=key)
    clock = FakeClock()
    db = Database(database_url)
    settings = Settings(
        environment="development",
        database_url=database_url,
        relayer_resend_after_s=RESEND_AFTER_S,
    )
    services = Services(settings, db, ChainRegistry({chain.config.chain_id: chain}), clock)
    yield Sending(services, chain, clock, Relayer(chain, db, clock))
    await db.dispose()


async def stored(services: Services, row_id: str) -> RelayerTransaction | None:
    async with services.db.sessions() as session:
        return await session.get(RelayerTransaction, row_id)


def raw_of(row: RelayerTransaction) -> bytes:
    return bytes.fromhex(row.raw_tx[2:])


async def test_send_records_the_signed_transaction_then_broadcasts_it(sending: Sending) -> None:
    chain, relayer = sending.chain, sending.relayer
    chain.pending_counts[relayer.address.lower()] = 5  # sent by something else before

    first = await relayer.send(CALL, GAS)
    second = await relayer.send(CALL, GAS)

    assert (first.nonce, second.nonce) == (5, 6)
    assert chain.sent == [raw_of(first), raw_of(second)]
    assert first.tx_hash == "0x" + keccak256(raw_of(first)).hex()
    assert Account.recover_transaction(raw_of(first)) == relayer.address
    recorded = await stored(sending.services, first.id)
    assert recorded is not None
    assert (recorded.status, recorded.hashes, recorded.attempts) == (
        TxStatus.PENDING,
        [first.tx_hash],
        1,
    )
    assert (recorded.to_address, recorded.data, recorded.gas) == (
        "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB",
        "0x1234",
        GAS,
    )
    assert (recorded.max_fee_per_gas, recorded.max_priority_fee_per_gas) == (
        str(chain.max_fee_per_gas),
        str(chain.max_priority_fee_per_gas),
    )


async def test_a_send_abandoned_while_recording_uses_no_nonce_and_sends_nothing(
    sending: Sending,
) -> None:
    async def refuse(_session: AsyncSession, _row: RelayerTransaction) -> None:
        raise LookupError("claimed elsewhere")

    with pytest.raises(LookupError):
        await sending.relayer.send(CALL, GAS, refuse)
    row = await sending.relayer.send(CALL, GAS)

    assert row.nonce == 0
    assert sending.chain.sent == [raw_of(row)]


async def test_a_refused_broadcast_keeps_the_record_for_the_tracker(sending: Sending) -> None:
    chain, relayer = sending.chain, sending.relayer
    chain.send_error = RpcError(-32000, "replacement transaction underpriced")

    row = await relayer.send(CALL, GAS)

    assert chain.sent == []
    assert (await stored(sending.services, row.id)) is not None
    chain.send_error = RpcError(-32000, "already known")
    assert await relayer.broadcast(row) is True
    chain.send_error = None
    assert await relayer.broadcast(row) is True
    assert chain.sent == [raw_of(row)]


async def test_replace_resigns_the_nonce_with_fees_raised_and_broadcasts_it(
    sending: Sending,
) -> None:
    chain, relayer = sending.chain, sending.relayer
    row = await relayer.send(CALL, GAS)
    sending.clock.advance(1_000)

    assert await relayer.replace(row.id, row.sent_at + 1) is None  # someone else was first
    replaced = await relayer.replace(row.id, row.sent_at)

    assert replaced is not None
    assert (replaced.nonce, replaced.attempts) == (row.nonce, 2)
    assert replaced.hashes == [row.tx_hash, replaced.tx_hash]
    assert replaced.max_fee_per_gas == str(bump(int(row.max_fee_per_gas)))
    assert replaced.max_priority_fee_per_gas == str(bump(int(row.max_priority_fee_per_gas)))
    assert replaced.sent_at == row.sent_at + 1_000
    assert chain.sent == [raw_of(row), raw_of(replaced)]
    assert Account.recover_transaction(raw_of(replaced)) == relayer.address


async def test_tracking_confirms_at_the_depth_and_drops_a_nonce_taken_by_another(
    sending: Sending,
) -> None:
    services, chain, relayer = sending.services, sending.chain, sending.relayer
    mined = await relayer.send(CALL, GAS)
    lost = await relayer.send(CALL, GAS)
    chain.receipts[mined.tx_hash] = {
        "transactionHash": mined.tx_hash,
        "status": 1,
        "blockNumber": 10,
        "gasUsed": 21_000,
    }
    chain.mined_counts[relayer.address.lower()] = 2  # lost's nonce went to something else
    chain.block = 9  # the receipt's block is not there yet for this depth

    first_pass = await track_pending(services, chain, relayer)
    chain.block = 10
    second_pass = await track_pending(services, chain, relayer)

    assert [(row.id, row.status) for row in first_pass] == [(lost.id, TxStatus.DROPPED)]
    assert [(row.id, row.status, row.block_number, row.gas_used) for row in second_pass] == [
        (mined.id, TxStatus.CONFIRMED, 10, 21_000)
    ]
    assert await track_pending(services, chain, relayer) == []
    assert chain.sent == [raw_of(mined), raw_of(lost)]  # neither was sent again


async def test_tracking_resends_a_forgotten_transaction_and_replaces_an_overdue_one(
    sending: Sending,
) -> None:
    services, chain, relayer = sending.services, sending.chain, sending.relayer
    row = await relayer.send(CALL, GAS)

    assert await track_pending(services, chain, relayer) == []
    assert chain.sent == [raw_of(row)]  # known to the node and not overdue: left alone
    chain.known.clear()  # the node restarted and forgot its pool
    assert await track_pending(services, chain, relayer) == []
    assert chain.sent == [raw_of(row), raw_of(row)]
    sending.clock.advance(RESEND_AFTER_S * 1000)
    assert await track_pending(services, chain, relayer) == []

    replaced = await stored(services, row.id)
    assert replaced is not None and replaced.attempts == 2
    assert chain.sent == [raw_of(row), raw_of(row), raw_of(replaced)]
