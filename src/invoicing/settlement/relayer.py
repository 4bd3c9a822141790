"""The relayer: one sender account per chain that simulates, signs, records and sends.

Nonces are allocated under a lock on the chain's ``relayer_accounts`` row (``FOR UPDATE`` on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), in the same transaction that records the signed
transaction, so they hold across processes. A transaction is recorded before it is
broadcast: after a crash, the tracker (``settlement.tracking``) re-sends what it finds.

What it may spend: no fee per gas above the chain's ``max_fee_per_gas`` (first send and every
bump; only a transaction the node holds is bumped; the arithmetic: ``settlement.gas``), and a
chain whose relayer balance is under ``relayer_min_balance`` is reported short
(``balance_shortfall``) so that withdrawals wait and ``/readyz`` shows the chain degraded.
Every transaction is charged to the day's budget as it is recorded, under the account lock
(``settlement.budget``).

On a chain without EIP-1559 (``ChainConfig.eip1559`` false, or no ``baseFeePerGas`` in its
latest block) transactions are type 0: the gas price is recorded as both max fee and tip,
and a replacement bumps it under the same ceiling.
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

from invoicing import metrics
from invoicing.addresses import normalize_address
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.evm import fee_fields
from invoicing.chain.gateway import ChainGateway
from invoicing.clock import Clock
from invoicing.db import Database, upsert
from invoicing.errors import ChainUnavailable
from invoicing.services import Services
from invoicing.settlement.budget import Limits, Spender, charge
from invoicing.settlement.gas import capped_fees, gas_limit, replacement_fees
from invoicing.tables.settlement import RelayerAccount, RelayerTransaction, TxStatus

log = logging.getLogger(__name__)

OnRecord = Callable[[AsyncSession, RelayerTransaction], Awaitable[None]]

# Chains whose relayer this process last saw under its threshold (warned once per drop).
_short_chains: set[int] = set()


class RelayerUnavailable(ChainUnavailable):
    """No relayer key is configured for the chain, so nothing can be sent there."""


class GasCapExceeded(Exception):
    """The call does not complete within the gas the relayer gives it."""

    def __init__(self, gas_cap: int, detail: str) -> None:
        super().__init__(f"needs more than {gas_cap} gas ({detail})")
        self.gas_cap = gas_cap


@dataclass(frozen=True)
class Call:
    """What to send: calldata to a contract, for a recorded purpose, and for whom (the
    share of the budget it spends; None: the service's own, charged to the chain only)."""

    purpose: str
    to: str
    data: bytes
    value: int = 0
    spender: Spender | None = None


class Relayer:
    """Sends and records transactions from one chain's relayer account: its gateway to the
    chain, the database that holds the nonces and the records, the clock, the key, and the
    daily budget it sends within."""

    def __init__(self, chain: ChainGateway, db: Database, clock: Clock, limits: Limits) -> None:
        key = chain.config.relayer_private_key()
        if not key:
            raise RelayerUnavailable(f"no relayer key configured for chain {chain.config.chain_id}")
        self.chain = chain
        self.db = db
        self.clock = clock
        self.limits = limits
        self.chain_id = chain.config.chain_id
        self._key = key
        self.address = str(Account.from_key(self._key).address)

    async def simulate(self, call: Call, gas_cap: int | None = None) -> int:
        """Run the call against the latest state (eth_estimateGas executes it); returns the
        gas limit to send with. A revert raises ``ContractRevert`` with its data.

        With ``gas_cap`` the call runs with at most that much gas and is sent with no more;
        one that needs more raises ``GasCapExceeded``. It runs with the fee fields a send now
        would carry: a contract that behaves otherwise at another gas price (``tx.gasprice``)
        is judged as it will run."""
        fees = await self.fee_fields()
        if gas_cap is None:
            estimate = await self.chain.estimate_gas(
                self.address, call.to, call.data, call.value, None, fees
            )
            return gas_limit(estimate)
        try:
            estimate = await self.chain.estimate_gas(
                self.address, call.to, call.data, call.value, gas_cap, fees
            )
        except ContractRevert:
            raise
        except RpcError as exc:
            if "gas" not in exc.message.lower():
                raise ChainUnavailable(f"gas estimate failed on chain {self.chain_id}") from exc
            raise GasCapExceeded(gas_cap, exc.message) from exc
        if estimate > gas_cap:  # a node that ignored the cap
            raise GasCapExceeded(gas_cap, f"estimated {estimate}")
        return gas_limit(estimate, gas_cap)

    async def send(
        self, call: Call, gas: int, on_record: OnRecord | None = None
    ) -> RelayerTransaction:
        """Record a signed transaction under a fresh nonce, then broadcast it.

        Refused before anything is recorded when the day's budget has no room for it
        (``BudgetExhausted``) or its owner is set aside (``SetAside``). ``on_record`` runs
        inside the recording transaction (it may add rows, or raise to abandon the send:
        then no nonce is used and nothing is broadcast)."""
        row = await self.record(call, gas, on_record)
        await self.broadcast(row)
        return row

    async def fee_fields(self) -> dict[str, int]:
        """The type and fee fields of a first send now (``evm.fee_fields``)."""
        max_fee, tip = capped_fees(*await self.chain.fee_caps(), self.chain.config.max_fee_per_gas)
        return fee_fields(await self.chain.eip1559(), max_fee, tip)

    async def record(
        self, call: Call, gas: int, on_record: OnRecord | None = None
    ) -> RelayerTransaction:
        max_fee, tip = capped_fees(*await self.chain.fee_caps(), self.chain.config.max_fee_per_gas)
        eip1559 = await self.chain.eip1559()
        # Transactions sent from this account by anything else move the chain's count on.
        chain_count = await self.chain.transaction_count(self.address, "pending")
        now_ms = self.clock.now_ms()
        async with self.db.transaction() as session:
            account = await self._lock_account(session, now_ms)
            await charge(session, self.limits, self.chain_id, call.spender, gas, now_ms)
            nonce = max(account.next_nonce, chain_count)
            account.next_nonce = nonce + 1
            account.updated_at = now_ms
            tx_hash, raw = self._sign(call, gas, nonce, fee_fields(eip1559, max_fee, tip))
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
                owner_key=None if call.spender is None else call.spender.owner_key,
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

    def _sign(self, call: Call, gas: int, nonce: int, fees: dict[str, Any]) -> tuple[str, bytes]:
        """Sign with ``fees`` (``evm.fee_fields``: type 2, or type 0 with gasPrice, which is
        then what the row records as its max fee and tip)."""
        tx: dict[str, Any] = fees | {
            "chainId": self.chain_id,
            "nonce": nonce,
            "to": normalize_address(call.to),
            "value": call.value,
            "data": call.data,
            "gas": gas,
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
        """Re-sign a transaction that was not mined in time, same nonce, fees raised >= 10%
        but never above the chain's ``max_fee_per_gas``.

        Only a transaction the node holds is bumped; one it does not hold (refused, or
        forgotten) is sent again as it is, since raising its price buys nothing. Returns None
        when nothing was replaced: not held, at the ceiling (logged and counted once), or
        replaced or finished by another process first."""
        async with self.db.sessions() as session:
            current = await session.get(RelayerTransaction, row_id)
        if current is None or current.status != TxStatus.PENDING:
            return None
        if not await self._node_holds(current.tx_hash):
            await self.broadcast(current)
            return None
        market = await self.chain.fee_caps()
        eip1559 = await self.chain.eip1559()
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
            old = (int(row.max_fee_per_gas), int(row.max_priority_fee_per_gas))
            fees = replacement_fees(old, market, self.chain.config.max_fee_per_gas)
            if fees is None:
                self._hold_at_ceiling(row, market[0], now_ms)
                return None
            tx_hash = self._resign(row, fee_fields(eip1559, *fees), fees, now_ms)
        log.info(
            "relayer chain %s: replaced nonce %s with %s (maxFee %s, tip %s)",
            self.chain_id,
            row.nonce,
            tx_hash,
            *fees,
        )
        await self.broadcast(row)
        return row

    def _resign(
        self, row: RelayerTransaction, signed: dict[str, Any], fees: tuple[int, int], now_ms: int
    ) -> str:
        max_fee, tip = fees
        call = Call(row.purpose, row.to_address, bytes.fromhex(row.data[2:]), int(row.value))
        tx_hash, raw = self._sign(call, row.gas, row.nonce, signed)
        row.max_fee_per_gas = str(max_fee)
        row.max_priority_fee_per_gas = str(tip)
        row.tx_hash = tx_hash
        row.raw_tx = "0x" + raw.hex()
        row.hashes = [*row.hashes, tx_hash]
        row.attempts += 1
        row.sent_at = now_ms
        row.updated_at = now_ms
        row.fee_ceiling_at = None
        return tx_hash

    def _hold_at_ceiling(self, row: RelayerTransaction, market_max_fee: int, now_ms: int) -> None:
        """The transaction cannot be re-priced under the ceiling: it waits at its fees. The
        first time is marked on the row, logged and counted; later ticks say nothing."""
        if row.fee_ceiling_at is not None:
            return
        row.fee_ceiling_at = now_ms
        row.updated_at = now_ms
        metrics.relayer_fee_ceiling(self.chain_id)
        log.warning(
            "relayer chain %s: %s nonce %s (%s) waits at maxFee %s: the next bump would pass "
            "the chain's max_fee_per_gas %s (market %s)",
            self.chain_id,
            row.purpose,
            row.nonce,
            row.tx_hash,
            row.max_fee_per_gas,
            self.chain.config.max_fee_per_gas,
            market_max_fee,
        )

    async def _node_holds(self, tx_hash: str) -> bool:
        try:
            return await self.chain.is_known_transaction(tx_hash)
        except RpcError:
            return False

    async def read_balance(self) -> int:
        """The relayer account's native balance now (also exported as a metric)."""
        balance = await self.chain.native_balance(self.address)
        metrics.relayer_balance(self.chain_id, balance)
        return balance

    async def balance_shortfall(self) -> str | None:
        """Why this relayer should start no withdrawals now: its balance is under the chain's
        ``relayer_min_balance`` (None when it is not). A warning is logged when the balance
        drops under the threshold, once until it recovers."""
        threshold = self.chain.config.relayer_min_balance or 0
        if threshold <= 0:
            return None
        balance = await self.read_balance()
        if balance >= threshold:
            if self.chain_id in _short_chains:
                _short_chains.discard(self.chain_id)
                log.info(
                    "relayer chain %s: balance %s is back over %s",
                    self.chain_id,
                    balance,
                    threshold,
                )
            return None
        reason = (
            f"relayer {self.address} balance {balance} wei is below the threshold "
            f"{threshold} wei; withdrawals wait until it is topped up"
        )
        if self.chain_id not in _short_chains:
            _short_chains.add(self.chain_id)
            log.warning("relayer chain %s: %s", self.chain_id, reason)
        return reason


async def relayer_shortfall(services: Services, chain: ChainGateway) -> str | None:
    """Why ``chain``'s relayer is short of funds (see ``Relayer.balance_shortfall``), or None;
    None as well for a chain without a relayer key."""
    try:
        relayer = Relayer(chain, services.db, services.clock, Limits.of(services.settings))
    except RelayerUnavailable:
        return None
    return await relayer.balance_shortfall()


def relayer_for(services: Services, chain_id: int) -> Relayer:
    """The relayer of a configured chain (UnsupportedChain / RelayerUnavailable otherwise)."""
    chain = services.chains.get(chain_id)
    return Relayer(chain, services.db, services.clock, Limits.of(services.settings))
