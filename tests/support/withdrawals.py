"""Shared steps of the settlement tests: paid invoices, payments, tracking, the relayer's sends."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.auth.guard import Caller
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY, TEST_TOKEN, load_artifact
from invoicing.chain.calldata import encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.config import TokenConfig
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.settlement.budget import Limits
from invoicing.settlement.parking import parked_escrows
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    ParkedEscrow,
    RelayerTransaction,
    TxStatus,
    Withdrawal,
    WithdrawalItem,
)
from tests.conftest import dev_tokens
from tests.support.chain import read_view

PAYER_KEY = DEV_PRIVATE_KEYS[3]
SETTINGS_SENDER_KEY = DEV_PRIVATE_KEYS[4]


def gateway(services: Services) -> EvmGateway:
    (chain,) = services.chains.all()
    assert isinstance(chain, EvmGateway)
    return chain


def relayer_of(services: Services) -> Relayer:
    return Relayer(gateway(services), services.db, services.clock, Limits.of(services.settings))


async def new_invoice(
    services: Services, owner: str, amount: str, token: str | None = None
) -> Invoice:
    chain = gateway(services)
    invoice, created = await create_invoice(
        services.db,
        chain,
        NewInvoice(
            owner_address=owner,
            chain_id=chain.config.chain_id,
            amount=amount,
            token_address=token,
        ),
        Caller(owner_key=owner.lower(), mode="api_key"),
        services.clock.now_ms(),
        services.settings.default_expiry_s,
    )
    assert created
    return invoice


async def pay(evm: EvmClient, invoice: Invoice, raw: int, token: str | None = None) -> None:
    """Send ``raw`` units of the invoice's token (or ``token``) to its escrow."""
    token = token or invoice.token_address
    if token is None:
        receipt = await evm.transact(PAYER_KEY, invoice.payment_address, value=raw)
    else:
        receipt = await evm.transact(
            PAYER_KEY, token, encode_call(TEST_TOKEN, "transfer", invoice.payment_address, raw)
        )
    assert receipt["status"] == 1


async def paid_invoice(
    services: Services, evm: EvmClient, owner: str, amount: str, token: str | None = None
) -> Invoice:
    invoice = await new_invoice(services, owner, amount, token)
    await pay(evm, invoice, int(invoice.required_raw))
    invoice = await recheck_invoice(services, invoice)
    assert invoice.status == "paid"
    return invoice


async def reload(services: Services, invoice_id: str) -> Invoice:
    async with services.db.sessions() as session:
        invoice = await session.get(Invoice, invoice_id)
        assert invoice is not None
        return invoice


async def balance_of(evm: EvmClient, address: str, token: str | None = None) -> int:
    if token is None:
        return await evm.get_balance(address)
    balance: int = await read_view(evm, token, ERC20, "balanceOf", address)
    return balance


async def settle_all(services: Services, timeout_s: float = 30.0) -> list[RelayerTransaction]:
    """Track until none of the relayer's transactions is pending; returns the finished ones."""
    finished: list[RelayerTransaction] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    relayer = relayer_of(services)
    while True:
        finished += await track_pending(services, gateway(services), relayer)
        async with services.db.sessions() as session:
            pending = await session.scalar(
                select(func.count())
                .select_from(RelayerTransaction)
                .where(
                    RelayerTransaction.chain_id == relayer.chain_id,
                    RelayerTransaction.status == TxStatus.PENDING,
                )
            )
        if not pending:
            return finished
        assert loop.time() < deadline, "relayer transactions still pending"
        await asyncio.sleep(0.05)


async def withdrawals_of(services: Services, invoice_id: str) -> list[Withdrawal]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(Withdrawal)
            .join(WithdrawalItem, WithdrawalItem.withdrawal_id == Withdrawal.id)
            .where(WithdrawalItem.invoice_id == invoice_id)
            .order_by(Withdrawal.created_at)
        )
        return list(rows)


async def parked_of(services: Services, owner: str) -> list[ParkedEscrow]:
    """``owner``'s parked escrows on the test chain, the next to be retried first. The run
    shares one database and one chain, so a test reads only its own owner's: another file's
    parked escrows are still there."""
    parked = await parked_escrows(services.db, gateway(services).config.chain_id)
    return [p for p in parked if p.owner_address == owner]


async def set_owner_fee(
    evm: EvmClient, factory: str, owner: LocalAccount, fee_bps: int, payout: str
) -> None:
    """Set an owner's fee and payout directly on the factory (signed by the owner)."""
    chain_id = await evm.chain_id()
    block = await evm.get_block("latest")
    deadline = int(block["timestamp"], 16) + 600
    nonce = await read_view(evm, factory, PAYMENT_FACTORY, "nonces", owner.address)
    fee = sign_typed(
        owner, set_fee_typed_data(chain_id, factory, owner.address, fee_bps, nonce, deadline)
    )
    data = encode_set_fee_meta(owner.address, fee_bps, nonce, deadline, fee)
    assert (await evm.transact(SETTINGS_SENDER_KEY, factory, data))["status"] == 1
    typed = set_payout_typed_data(chain_id, factory, owner.address, payout, nonce + 1, deadline)
    data = encode_set_payout_meta(
        owner.address, payout, nonce + 1, deadline, sign_typed(owner, typed)
    )
    assert (await evm.transact(SETTINGS_SENDER_KEY, factory, data))["status"] == 1


def sign_typed(account: LocalAccount, typed: dict[str, Any]) -> bytes:
    signed = Account.sign_message(encode_typed_data(full_message=typed), account.key)
    return bytes(signed.signature)


BLOCKING_TOKEN = "BlockingToken"


async def deploy_blocking_token(evm: EvmClient) -> str:
    return await deploy_contract(evm, DEV_PRIVATE_KEYS[0], load_artifact(BLOCKING_TOKEN).bytecode)


def with_token(dev: DevDeployment, token: str) -> dict[str, Any]:
    """Chain overrides for ``make_services``: the dev allow-list plus a BlockingToken."""
    return {"tokens": (*dev_tokens(dev), TokenConfig(token, "BLOCK", 18))}


async def token_call(evm: EvmClient, token: str, name: str, *args: object) -> None:
    receipt = await evm.transact(PAYER_KEY, token, encode_call(BLOCKING_TOKEN, name, *args))
    assert receipt["status"] == 1


async def paid_in(
    services: Services, evm: EvmClient, owner: str, amount: str, token: str
) -> Invoice:
    """A paid invoice in a BlockingToken, its escrow funded by minting."""
    invoice = await new_invoice(services, owner, amount, token)
    await token_call(evm, token, "mint", invoice.payment_address, int(invoice.required_raw))
    assert (await recheck_invoice(services, invoice)).status == "paid"
    return await reload(services, invoice.id)


def raw_units(amount: str, decimals: int) -> int:
    return int(Decimal(amount) * 10**decimals)


async def relayer_tx_count(services: Services) -> int:
    async with services.db.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(RelayerTransaction)) or 0)
