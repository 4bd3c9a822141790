"""x402 v2 payloads as a client builds them: the PAYMENT-SIGNATURE header of an invoice, and the
body of a facilitator ``/verify`` call for a payment of ``PRICE``."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from invoicing.chain.deploy import TEST_TOKEN_EIP712, DevDeployment
from invoicing.chain.eip3009 import Authorization, transfer_typed_data
from invoicing.chain.evm import EvmClient
from tests.support.factory import sign_typed
from tests.support.gasless import now_s


async def payment_header(
    evm: EvmClient, dev: DevDeployment, payer: Any, invoice: Any, **changes: Any
) -> str:
    """A PAYMENT-SIGNATURE header as a client builds it, with ``changes`` to its parts."""
    now = await now_s(evm)
    value = int(changes.pop("value", invoice.required_raw))
    auth = Authorization(
        payer.address, changes.pop("to", invoice.payment_address), value, 0, now + 300,
        os.urandom(32),
    )  # fmt: skip
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    accepted = {
        "scheme": "exact", "network": f"eip155:{dev.chain_id}", "amount": invoice.required_raw,
        "asset": dev.token, "payTo": invoice.payment_address, "maxTimeoutSeconds": 300,
        "extra": {"name": "Test USD", "version": "1"},
    }  # fmt: skip
    accepted.update(changes.pop("accepted", {}))
    payload = {
        "x402Version": 2,
        "accepted": accepted,
        "payload": {
            "signature": "0x" + sign_typed(payer.key, typed).hex(),
            "authorization": {**auth.message(), "value": str(auth.value),
                              "validAfter": str(auth.valid_after),
                              "validBefore": str(auth.valid_before)},
        },
    }  # fmt: skip
    payload.update(changes)
    return base64.b64encode(json.dumps(payload).encode()).decode()


PRICE = 250_000


async def verify_body(
    evm: EvmClient, dev: DevDeployment, payer: Any, pay_to: str, **accepted: Any
) -> dict[str, Any]:
    now = await now_s(evm)
    price = int(accepted.pop("amount", PRICE))  # ``amount=`` another price
    auth = Authorization(payer.address, pay_to, price, 0, now + 300, os.urandom(32))
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    requirements = {
        "scheme": "exact", "network": f"eip155:{dev.chain_id}", "amount": str(price),
        "asset": dev.token, "payTo": pay_to, "maxTimeoutSeconds": 300,
        "extra": {"name": "Test USD", "version": "1"}, **accepted,
    }  # fmt: skip
    message = {**auth.message(), "value": str(price), "validAfter": "0",
               "validBefore": str(auth.valid_before)}  # fmt: skip
    payload = {
        "x402Version": 2,
        "accepted": requirements,
        "payload": {"signature": "0x" + sign_typed(payer.key, typed).hex(),
                    "authorization": message},
    }  # fmt: skip
    return {"x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements}
