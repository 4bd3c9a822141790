"""Gasless payments on the test chain: a payer funded in TUSD only, an opted-in invoice, the
page's signed EIP-3009 authorization, and what the relayer recorded for it."""

from __future__ import annotations

import os
import time
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import TEST_TOKEN_EIP712, DevDeployment
from invoicing.chain.eip3009 import Authorization, transfer_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.payments.eip3009.models import GaslessPayment
from invoicing.payments.opt_in import set_gasless
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import RelayerTransaction, TxPurpose
from tests.support.factory import sign_typed
from tests.support.withdrawals import new_invoice

MINTER_KEY = DEV_PRIVATE_KEYS[0]


async def funded_payer(evm: EvmClient, dev: DevDeployment, amount: int) -> LocalAccount:
    """A fresh wallet holding ``amount`` TUSD and no native coin."""
    payer: LocalAccount = Account.create()
    mint = encode_call(TEST_TOKEN, "mint", payer.address, amount)
    assert (await evm.transact(MINTER_KEY, dev.token, mint))["status"] == 1
    assert await evm.get_balance(payer.address) == 0
    return payer


async def now_s(evm: EvmClient) -> int:
    """Now for both the service's clock and the chain's (the later of the two)."""
    block = await evm.get_block("latest")
    return max(int(time.time()), int(block["timestamp"], 16))


async def opted_in_invoice(services: Services, owner: str, amount: str = "2.5") -> Invoice:
    await set_gasless(services, owner, services.chains.all()[0].config.chain_id, True)
    return await new_invoice(
        services, owner, amount, services.chains.all()[0].config.tokens[0].address
    )


async def body_for(
    evm: EvmClient,
    dev: DevDeployment,
    payer: LocalAccount,
    invoice: Invoice,
    *,
    value: int | None = None,
    to: str | None = None,
    after: int = -120,
    before: int = 600,
    nonce: bytes | None = None,
    chain_id: int | None = None,
    signer: LocalAccount | None = None,
) -> dict[str, Any]:
    """The page's body: an authorization of the amount due to the escrow, signed by
    ``signer`` (the payer) in TUSD's domain on ``chain_id`` (the invoice's)."""
    now = await now_s(evm)
    auth = Authorization(
        payer.address,
        to or invoice.payment_address,
        int(invoice.required_raw) if value is None else value,
        now + after,
        now + before,
        os.urandom(32) if nonce is None else nonce,
    )
    domain_chain = dev.chain_id if chain_id is None else chain_id
    typed = transfer_typed_data(TEST_TOKEN_EIP712, domain_chain, dev.token, auth)
    signature = sign_typed((signer or payer).key, typed)
    return {
        "chainId": dev.chain_id,
        "tokenAddress": dev.token,
        "from": auth.from_address,
        "to": auth.to_address,
        "value": str(auth.value),
        "validAfter": str(auth.valid_after),
        "validBefore": str(auth.valid_before),
        "nonce": "0x" + auth.nonce.hex(),
        "signature": "0x" + signature.hex(),
    }


async def sent_for(services: Services, owner: str) -> int:
    """Relayer transactions recorded for ``owner``'s share (gasless ones are its)."""
    async with services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(RelayerTransaction)
            .where(
                RelayerTransaction.owner_key == owner.lower(),
                RelayerTransaction.purpose == TxPurpose.GASLESS,
            )
        )
    return int(count or 0)


async def gasless_rows(services: Services, invoice_id: str) -> list[GaslessPayment]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(GaslessPayment).where(GaslessPayment.invoice_id == invoice_id)
        )
        return list(rows)
