"""The relayer: one sender account per chain that simulates, signs, records and sends.

Nonces are allocated under a lock on the chain's ``relayer_accounts`` row (``FOR UPDATE`` on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), in the same transaction that records the signed
transaction, so they hold across processes. A transaction is recorded before it is
broadcast: after a crash, the tracker (``settlement.tracking``) re-sends what it finds.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import normalize_address
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.rpc import RpcError
from invoicing.clock import Clock
from invoicing.db import Database, upsert
from invoicing.errors import ChainUnavailable
from invoicing.services import Services
from invoicing.settlement.models import RelayerAccount, RelayerTransaction, TxStatus

log = logging.getLogger(__name__)

# EIP-7825: no transaction may ask for more gas than this.
TX_GAS_CAP = 16_777_216
# Headroom over the estimate: state can change between simulation and inclusion.
GAS_MARGIN_NUM, GAS_MARGIN_DEN = 5, 4
GAS_MARGIN_FLAT = 20_000

OnRecord = Callable[[AsyncSession, RelayerTransaction], Awaitable[None]]


class RelayerUnavailable(ChainUnavailable):
    """No relayer key is configured for the chain, so nothing can be sent there."""


@dataclass(frozen=True)
class Call:
    """What to send: calldata to a contract, for a recorded purpose."""

    purpose: str
    to: str
    data: bytes
    value: int = 0


def bump(value: int) -> int:
    """A fee raised by 12.5% (rounded up): above the 10% nodes require for a replacement."""
    return value + (value + 7) // 8


def gas_limit(estimate: int) -> int:
    return min(TX_GAS_CAP, estimate * GAS_MARGIN_NUM // GAS_MARGIN_DEN + GAS_MARGIN_FLAT)


class Relayer:
    """Sends and records transactions from one chain's relayer account: its gateway to the
    chain, the database that holds the nonces and the records, the clock, and the key."""

    def __init__(self, chain: ChainGateway, db: Database, clock: Clock) -> None:
        key = chain.config.relayer_private_key()
        if not key:
            raise RelayerUnavailable(f"no relayer key configured for chain {chain.config.chain_id}")
        self.chain = chain
        self.db = db
        self.clock = clock
        self.chain_id = chain.config.chain_id
        self._key = key
        self.address = str(Account.from_key(self._key).address)

    async def simulate(self, call: Call) -> int:
        """Run the call against the latest state (eth_estimateGas executes it); returns the
        gas limit to send with. A revert raises ``ContractRevert`` with its data."""
        estimate = await self.chain.estimate_gas(self.address, call.to, call.data, call.value)
        return gas_limit(estimate)

    async def send(
        self, call: Call, gas: int, on_record: OnRecord | None = None
    ) -> RelayerTransaction:
        """Record a signed transaction under a fresh nonce, then broadcast it.

        ``on_record`` runs inside the recording transaction (it may add rows, or raise to
        abandon the send: then no nonce is used and nothing is broadcast)."""
        row = await self.record(call, gas, on_record)
        await self.broadcast(row)
        return row

    async def record(
        self, call: Call, gas: int, on_record: OnRecord | None = None
    ) -> RelayerTransaction:
        max_fee, tip = await self.chain.fee_caps()
        # Transactions sent from this account by anything else move the chain's count on.
        chain_count = await self.chain.transaction_count(self.address, "pending")
        now_ms = self.clock.now_ms()
        async with self.db.transaction() as session:
            account = await self._lock_account(session, now_ms)
            nonce = max(account.next_nonce, chain_count)
            account.next_nonce = nonce + 1
            account.updated_at = now_ms
            tx_hash, raw = self._sign(call, gas, nonce, max_fee, tip)
            row = RelayerTransaction(
                id=str(uuid.uuid4()),
                chain_id=self.chain_id,
                sender=self.address,
                nonce=nonce,
                purpose=call.purpose,
                to_address=normalize_address(call.to),
                data="0x" + call.data.hex(),
                value=str(call.value),
                gas=gas,
                max_fee_per_gas=str(max_fee),
                max_priority_fee_per_gas=str(tip),
                tx_hash=tx_hash,
                raw_tx="0x" + raw.hex(),
                hashes=[tx_hash],
                status=TxStatus.PENDING,
                attempts=1,
                sent_at=now_ms,
                created_at=now_ms,
                updated_at=now_ms,
            )
            session.add(row)
            await session.flush()
            if on_record is not None:
                await on_record(session, row)
        log.info(
            "relayer chain %s: recorded %s nonce %s tx %s",
            self.chain_id,
            call.purpose,
            nonce,
            tx_hash,
        )
        return row

    async def _lock_account(self, session: AsyncSession, now_ms: int) -> RelayerAccount:
        await session.execute(
            upsert(self.db.dialect, RelayerAccount)
            .values(chain_id=self.chain_id, address=self.address, next_nonce=0, updated_at=now_ms)
            .on_conflict_do_nothing(index_elements=["chain_id"])
        )
        account = await session.scalar(
            select(RelayerAccount)
            .where(RelayerAccount.chain_id == self.chain_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        assert account is not None
        if account.address != self.address:
            # The relayer key changed: the old account's nonces mean nothing for the new one.
            account.address = self.address
            account.next_nonce = 0
        return account

    def _sign(self, call: Call, gas: int, nonce: int, max_fee: int, tip: int) -> tuple[str, bytes]:
        tx: dict[str, Any] = {
            "type": 2,
            "chainId": self.chain_id,
            "nonce": nonce,
            "to": normalize_address(call.to),
            "value": call.value,
            "data": call.data,
            "gas": gas,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": min(tip, max_fee),
        }
        signed = Account.sign_transaction(tx, self._key)
        return "0x" + bytes(signed.hash).hex(), bytes(signed.raw_transaction)

    async def broadcast(self, row: RelayerTransaction) -> bool:
        """Send the newest signed version; False when the node refused it (the tracker
        retries, replaces or drops it later)."""
        try:
            await self.chain.send_raw_transaction(bytes.fromhex(row.raw_tx[2:]))
        except RpcError as exc:
            if "already known" in exc.message.lower():
                return True
            log.warning("relayer chain %s: node refused %s: %s", self.chain_id, row.tx_hash, exc)
            return False
        except ChainUnavailable as exc:
            log.warning("relayer chain %s: could not send %s: %s", self.chain_id, row.tx_hash, exc)
            return False
        return True

    async def replace(self, row_id: str, expected_sent_at: int) -> RelayerTransaction | None:
        """Re-sign a transaction that was not mined in time, same nonce, fees raised >= 10%.

        Returns None when another process replaced or finished it first."""
        max_fee, tip = await self.chain.fee_caps()
        now_ms = self.clock.now_ms()
        async with self.db.transaction() as session:
            row = await session.scalar(
                select(RelayerTransaction)
                .where(RelayerTransaction.id == row_id)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
            if row is None or row.status != TxStatus.PENDING or row.sent_at != expected_sent_at:
                return None
            new_max_fee = max(bump(int(row.max_fee_per_gas)), max_fee)
            new_tip = max(bump(int(row.max_priority_fee_per_gas)), min(tip, new_max_fee))
            call = Call(row.purpose, row.to_address, bytes.fromhex(row.data[2:]), int(row.value))
            tx_hash, raw = self._sign(call, row.gas, row.nonce, new_max_fee, new_tip)
            row.max_fee_per_gas = str(new_max_fee)
            row.max_priority_fee_per_gas = str(new_tip)
            row.tx_hash = tx_hash
            row.raw_tx = "0x" + raw.hex()
            row.hashes = [*row.hashes, tx_hash]
            row.attempts += 1
            row.sent_at = now_ms
            row.updated_at = now_ms
        log.info(
            "relayer chain %s: replaced nonce %s with %s (maxFee %s, tip %s)",
            self.chain_id,
            row.nonce,
            tx_hash,
            new_max_fee,
            new_tip,
        )
        await self.broadcast(row)
        return row


def relayer_for(services: Services, chain_id: int) -> Relayer:
    """The relayer of a configured chain (UnsupportedChain / RelayerUnavailable otherwise)."""
    return Relayer(services.chains.get(chain_id), services.db, services.clock)
