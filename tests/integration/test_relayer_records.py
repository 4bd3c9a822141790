"""The relayer and its tracker on FakeChain and a real database (no node): a transaction is
recorded before it is broadcast, replaced with raised fees (only when the node holds it, never
above the chain's max fee per gas), re-sent, confirmed or dropped."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import rlp
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.answers import RpcError
from invoicing.chain.chains import ChainRegistry
from invoicing.chain.fake import FakeChain
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.hashing import keccak256
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.budget import Limits
from invoicing.settlement.gas import bump
from invoicing.settlement.relayer import Call, Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.tables.settlement import RelayerTransaction, TxPurpose, TxStatus

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
    yield Sending(services, chain, clock, Relayer(chain, db, clock, Limits.of(services.settings)))
    await db.dispose()


async def stored(services: Services, row_id: str) -> RelayerTransaction | None:
    async with services.db.sessions() as session:
        return await session.get(RelayerTransaction, row_id)


def raw_of(row: RelayerTransaction) -> bytes:
    return bytes.fromhex(row.raw_tx[2:])


def signed_fields(raw: bytes) -> dict[str, Any]:
    """The fields of a signed EIP-1559 transaction, as the node reads them."""
    fields: dict[str, Any] = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
    return fields


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


def with_ceiling(chain: FakeChain, max_fee_per_gas: int) -> None:
    chain.config = replace(chain.config, max_fee_per_gas=max_fee_per_gas)


def ceiling_count(chain: FakeChain) -> float:
    value = REGISTRY.get_sample_value(
        "invoicing_relayer_fee_ceiling_total", {"chain_id": str(chain.config.chain_id)}
    )
    return value or 0.0


async def test_a_first_send_offers_no_more_than_the_chains_max_fee_per_gas(
    sending: Sending,
) -> None:
    chain, relayer = sending.chain, sending.relayer
    with_ceiling(chain, 1_500_000_000)
    chain.max_fee_per_gas, chain.max_priority_fee_per_gas = 80 * 10**9, 2 * 10**9

    row = await relayer.send(CALL, GAS)

    assert (row.max_fee_per_gas, row.max_priority_fee_per_gas) == ("1500000000", "1500000000")
    signed = signed_fields(raw_of(row))
    assert (signed["maxFeePerGas"], signed["maxPriorityFeePerGas"]) == (1_500_000_000,) * 2


async def test_a_transaction_the_node_does_not_hold_is_resent_not_bumped(
    sending: Sending,
) -> None:
    services, chain, relayer = sending.services, sending.chain, sending.relayer
    chain.send_error = RpcError(-32000, "insufficient funds for gas * price + value")
    row = await relayer.send(CALL, GAS)  # refused: the node never took it

    for _ in range(3):
        sending.clock.advance(RESEND_AFTER_S * 1000)
        assert await track_pending(services, chain, relayer) == []

    again = await stored(services, row.id)
    assert again is not None
    assert (again.attempts, again.hashes, again.max_fee_per_gas) == (
        1,
        [row.tx_hash],
        row.max_fee_per_gas,
    )
    chain.send_error = None
    sending.clock.advance(RESEND_AFTER_S * 1000)
    await track_pending(services, chain, relayer)
    assert chain.sent == [raw_of(row)]  # sent again as it was, at its first fees


async def test_a_transaction_at_the_ceiling_waits_there_logged_and_counted_once(
    sending: Sending, caplog: pytest.LogCaptureFixture
) -> None:
    services, chain, relayer = sending.services, sending.chain, sending.relayer
    with_ceiling(chain, 2_400_000_000)  # one bump of the fake's 2 gwei fits, not two
    counted_before = ceiling_count(chain)
    row = await relayer.send(CALL, GAS)

    with caplog.at_level(logging.WARNING, logger="invoicing.settlement.relayer"):
        for _ in range(4):
            sending.clock.advance(RESEND_AFTER_S * 1000)
            assert await track_pending(services, chain, relayer) == []

    waiting = await stored(services, row.id)
    assert waiting is not None
    assert (waiting.attempts, waiting.max_fee_per_gas) == (2, "2250000000")
    assert waiting.fee_ceiling_at == sending.clock.now_ms() - 2 * RESEND_AFTER_S * 1000
    assert len(chain.sent) == 2  # the first send and the one bump
    assert ceiling_count(chain) == counted_before + 1
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"relayer chain {chain.config.chain_id}: set_fee nonce 0 ({waiting.tx_hash}) waits at "
        "maxFee 2250000000: the next bump would pass the chain's max_fee_per_gas 2400000000 "
        "(market 2000000000)"
    ]
    # Mined at last: it is confirmed like any other.
    chain.receipts[waiting.tx_hash] = {
        "transactionHash": waiting.tx_hash, "status": 1, "blockNumber": 1, "gasUsed": 50_000,
    }  # fmt: skip
    finished = await track_pending(services, chain, relayer)
    assert [(r.id, r.status) for r in finished] == [(row.id, TxStatus.CONFIRMED)]


def legacy_fields(raw: bytes) -> tuple[int, int]:
    """(type byte or 0, gasPrice) of a signed transaction: a legacy one is an RLP list."""
    assert raw[0] >= 0xC0, "not a type-0 transaction"
    nonce, gas_price, *_ = rlp.decode(raw)
    return int.from_bytes(nonce, "big"), int.from_bytes(gas_price, "big")


async def test_a_legacy_fee_chain_gets_type_0_bumped_under_the_ceiling(sending: Sending) -> None:
    chain, relayer = sending.chain, sending.relayer
    chain.eip1559_fees = False
    chain.max_fee_per_gas = chain.max_priority_fee_per_gas = 10**9  # eth_gasPrice
    with_ceiling(chain, 1_200_000_000)

    row = await relayer.send(CALL, GAS)
    sending.clock.advance(1_000)
    replaced = await relayer.replace(row.id, row.sent_at)
    assert replaced is not None
    sending.clock.advance(1_000)
    held = await relayer.replace(row.id, replaced.sent_at)

    assert legacy_fields(raw_of(row)) == (row.nonce, 10**9)
    assert (row.max_fee_per_gas, row.max_priority_fee_per_gas) == ("1000000000",) * 2
    assert legacy_fields(raw_of(replaced)) == (row.nonce, bump(10**9))
    assert replaced.max_fee_per_gas == replaced.max_priority_fee_per_gas == str(bump(10**9))
    assert Account.recover_transaction(raw_of(replaced)) == relayer.address
    # The next bump (10% at least) would pass 1.2 gwei: it waits at the price it has.
    assert held is None
    assert chain.sent == [raw_of(row), raw_of(replaced)]
