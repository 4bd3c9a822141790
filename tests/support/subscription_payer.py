"""A subscription's payer on the test chain: an opted-in owner's offer, a payer holding TUSD
and no native coin, the payer's signed subscription, EIP-2612 permit and cancellation, and
what the relayer sent for them."""

from __future__ import annotations

from typing import Any

from eth_abi.abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import TEST_TOKEN_EIP712, DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.hashing import keccak256
from invoicing.payments.opt_in import set_gasless
from invoicing.payments.subscriptions.permit import permit_typed_data
from invoicing.services import Services
from invoicing.tables.settlement import RelayerTransaction
from tests.support.api import issue_api_key, key_headers
from tests.support.factory import sign_typed, typed_digest

PERIOD_S = 60
AMOUNT_RAW = 2_500_000  # 2.5 TUSD a period


async def offered(
    services: Services, http: Any, dev: DevDeployment, **extra: Any
) -> tuple[LocalAccount, dict[str, str], dict[str, Any]]:
    """An opted-in owner's subscription of 2.5 TUSD a minute: (owner, headers, created)."""
    owner: LocalAccount = Account.create()
    await set_gasless(services, owner.address, dev.chain_id, True)
    headers = key_headers(await issue_api_key(services, owner))
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "tokenAddress": dev.token,
        "amount": "2.5",
        "periodSeconds": PERIOD_S,
        **extra,
    }
    created = await http.post("/integration/subscriptions", json=body, headers=headers)
    assert created.status_code == 201, created.text
    return owner, headers, created.json()


def signed(key: Any, typed: dict[str, Any]) -> str:
    return "0x" + sign_typed(key, typed).hex()


async def permit_nonce(evm: EvmClient, dev: DevDeployment, holder: str) -> int:
    raw = await evm.eth_call(dev.token, encode_call(TEST_TOKEN, "nonces", holder))
    return int.from_bytes(raw[:32], "big")


async def permit_for(
    evm: EvmClient,
    dev: DevDeployment,
    key: Any,
    owner: str,
    spender: str,
    value: int,
    deadline: int,
) -> dict[str, Any]:
    """The ``permit`` of an authorization body: ``key``'s EIP-2612 Permit (as the page signs
    it), for ``owner``'s current nonce."""
    message = {
        "owner": owner,
        "spender": spender,
        "value": value,
        "nonce": await permit_nonce(evm, dev, owner),
        "deadline": deadline,
    }
    typed = permit_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, message)
    return {"value": str(value), "deadline": deadline, "signature": signed(key, typed)}


async def sent(services: Services, purpose: str) -> int:
    """How many transactions the relayer sent for ``purpose``."""
    async with services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(RelayerTransaction)
            .where(RelayerTransaction.purpose == purpose)
        )
    return int(count or 0)


async def token_balance(evm: EvmClient, dev: DevDeployment, holder: str) -> int:
    raw = await evm.eth_call(dev.token, encode_call(TEST_TOKEN, "balanceOf", holder))
    return int.from_bytes(raw[:32], "big")


async def allowance(evm: EvmClient, dev: DevDeployment, holder: str, spender: str) -> int:
    raw = await evm.eth_call(dev.token, encode_call(TEST_TOKEN, "allowance", holder, spender))
    return int.from_bytes(raw[:32], "big")


def cancel_typed_data(typed: dict[str, Any], payer: str) -> dict[str, Any]:
    """The ``Cancel`` a payer signs for its subscription to ``typed`` (the create answer's
    ``authorization.typedData``), as the payer's page builds it."""
    subscription = keccak256(encode(["bytes32", "address"], [typed_digest(typed), payer]))
    return {
        "types": {
            "EIP712Domain": typed["types"]["EIP712Domain"],
            "Cancel": [{"name": "subscription", "type": "bytes32"}],
        },
        "primaryType": "Cancel",
        "domain": typed["domain"],
        "message": {"subscription": "0x" + subscription.hex()},
    }
