"""Gasless refunds (the contract part): PaymentFactory.refundMeta on a real anvil.

The owner signs an EIP-712 ``Refund``; anyone relays it. ``amount`` goes from the escrow to
``to`` without a fee; the rest of a refunded token stays in the escrow (swept later as usual);
the rest of native coin is paid to the owner as a sweep pays it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN, load_artifact
from invoicing.chain.calldata import encode_refund_meta, encode_withdraw
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.eip712 import refund_typed_data
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import RevertReason
from invoicing.settings import Settings
from tests.support.factory import (
    deadline_in,
    deploy_test_contract,
    expect_revert,
    factory_events,
    factory_nonce,
    native_credit,
    send,
    set_fee_and_payout,
    sign_typed,
    token_balance,
    typed_digest,
)
from tests.support.node import run_node_script

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[2]
RELAYER_KEY = DEV_PRIVATE_KEYS[1]
CALLER_KEY = DEV_PRIVATE_KEYS[3]
SIGN_REFUND = Path(__file__).resolve().parents[2] / "tests" / "js" / "sign_refund.mjs"
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


async def refund_call(
    evm: EvmClient,
    factory: str,
    user: str,
    salt: bytes,
    token: str | None,
    to: str,
    amount: int,
    *,
    signer: LocalAccount,
    nonce: int | None = None,
    deadline: int | None = None,
) -> bytes:
    """refundMeta calldata signed by ``signer`` (the owner unless a test says otherwise)."""
    chain_id = await evm.chain_id()
    nonce = await factory_nonce(evm, factory, user) if nonce is None else nonce
    deadline = await deadline_in(evm, 3600) if deadline is None else deadline
    typed = refund_typed_data(chain_id, factory, user, salt, token, to, amount, nonce, deadline)
    signature = sign_typed(signer.key, typed)
    return encode_refund_meta(
        user, salt, token or ZERO_ADDRESS, to, amount, nonce, deadline, signature
    )


async def pay_token(evm: EvmClient, token: str, escrow: str, amount: int) -> None:
    await send(evm, PAYER_KEY, token, encode_call(TEST_TOKEN, "transfer", escrow, amount))


async def pay_native(evm: EvmClient, escrow: str, amount: int) -> None:
    await send(evm, PAYER_KEY, escrow, b"", value=amount)


def new_salt() -> bytes:
    return os.urandom(32)


async def test_partial_token_refund_leaves_the_rest_sweepable_with_its_fee(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payer, payout = Account.create(), Account.create().address, Account.create().address
    await set_fee_and_payout(evm, dev.factory, owner, 500, payout)  # nonces 0 and 1
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_token(evm, dev.token, escrow, 10_000)
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 3_000, signer=owner
    )

    receipt = await send(evm, RELAYER_KEY, dev.factory, data)  # any relayer

    assert factory_events(receipt, "Refunded") == [
        (owner.address, salt, dev.token, payer, 3_000, 2)
    ]
    assert factory_events(receipt, "Withdrawn") == []
    assert await token_balance(evm, dev.token, payer) == 3_000  # no fee on a refund
    assert await token_balance(evm, dev.token, escrow) == 7_000
    assert await token_balance(evm, dev.token, owner.address) == 0
    assert await token_balance(evm, dev.token, dev.factory) == 0
    assert await factory_nonce(evm, dev.factory, owner.address) == 3

    receipt = await send(
        evm, CALLER_KEY, dev.factory, encode_withdraw(owner.address, dev.token, [salt])
    )

    assert factory_events(receipt, "Withdrawn") == [(owner.address, dev.token, 1, 7_000, 350)]
    assert await token_balance(evm, dev.token, owner.address) == 6_650
    assert await token_balance(evm, dev.token, payout) == 350


async def test_full_token_refund_empties_the_escrow(evm: EvmClient, dev: DevDeployment) -> None:
    owner, payer = Account.create(), Account.create().address
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_token(evm, dev.token, escrow, 4_321)
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 4_321, signer=owner
    )

    await send(evm, RELAYER_KEY, dev.factory, data)

    assert await token_balance(evm, dev.token, payer) == 4_321
    assert await token_balance(evm, dev.token, escrow) == 0


async def test_partial_native_refund_pays_the_rest_to_the_owner_as_a_sweep(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payer, payout = Account.create(), Account.create().address, Account.create().address
    await set_fee_and_payout(evm, dev.factory, owner, 200, payout)
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_native(evm, escrow, 10_000)
    await pay_token(evm, dev.token, escrow, 77)  # another asset: not moved by a native refund
    data = await refund_call(
        evm, dev.factory, owner.address, salt, None, payer, 2_500, signer=owner
    )
    relayer = Account.from_key(RELAYER_KEY).address
    call = {"from": relayer, "to": dev.factory, "data": "0x" + data.hex()}

    estimate = int(await evm.call_rpc("eth_estimateGas", [call]), 16)
    receipt = await send(evm, RELAYER_KEY, dev.factory, data)

    # Three native sends to accounts that do not exist yet, each started only with its whole
    # stipend at hand: still within the relayer's default meta-transaction gas limit.
    assert estimate <= Settings.model_fields["relayer_meta_gas_limit"].default, estimate
    assert factory_events(receipt, "Refunded") == [
        (owner.address, salt, ZERO_ADDRESS, payer, 2_500, 2)
    ]
    assert factory_events(receipt, "Withdrawn") == [(owner.address, ZERO_ADDRESS, 1, 7_500, 150)]
    assert await evm.get_balance(payer) == 2_500
    assert await evm.get_balance(owner.address) == 7_350
    assert await evm.get_balance(payout) == 150
    assert await evm.get_balance(escrow) == 0
    assert await token_balance(evm, dev.token, escrow) == 77


async def test_token_refund_pays_native_coin_in_the_escrow_to_the_owner(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payer = Account.create(), Account.create().address
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_token(evm, dev.token, escrow, 500)
    await pay_native(evm, escrow, 9)
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 500, signer=owner
    )

    receipt = await send(evm, RELAYER_KEY, dev.factory, data)

    assert factory_events(receipt, "Withdrawn") == [(owner.address, ZERO_ADDRESS, 1, 9, 0)]
    assert await evm.get_balance(owner.address) == 9
    assert await evm.get_balance(escrow) == 0


async def test_eip1271_wallet_owner_refunds(evm: EvmClient, dev: DevDeployment) -> None:
    signer, payer = Account.create(), Account.create().address
    code = load_artifact("MockERC1271Wallet").bytecode + encode(["address"], [signer.address])
    wallet = await deploy_contract(evm, DEV_PRIVATE_KEYS[0], code)
    salt = new_salt()
    await pay_token(evm, dev.token, escrow_address(dev.factory, wallet, salt), 800)
    data = await refund_call(evm, dev.factory, wallet, salt, dev.token, payer, 800, signer=signer)

    await send(evm, RELAYER_KEY, dev.factory, data)

    assert await token_balance(evm, dev.token, payer) == 800
    assert await factory_nonce(evm, dev.factory, wallet) == 1


# --- rejections: each leaves the escrow, the recipient and the nonce as they were ----------


async def refused(
    evm: EvmClient, dev: DevDeployment, owner: LocalAccount, escrow: str, payer: str, data: bytes
) -> RevertReason:
    nonce = await factory_nonce(evm, dev.factory, owner.address)
    reason = await expect_revert(evm, RELAYER_KEY, dev.factory, data)
    assert await token_balance(evm, dev.token, escrow) == 1_000
    assert await token_balance(evm, dev.token, payer) == 0
    assert await factory_nonce(evm, dev.factory, owner.address) == nonce
    return reason


@pytest.fixture
async def funded(evm: EvmClient, dev: DevDeployment) -> tuple[LocalAccount, bytes, str, str]:
    """(owner, salt, escrow, payer): an escrow holding 1,000 TUSD."""
    owner, payer = Account.create(), Account.create().address
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_token(evm, dev.token, escrow, 1_000)
    return owner, salt, escrow, payer


async def test_refund_signed_by_another_key_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 1_000, signer=Account.create()
    )

    reason = await refused(evm, dev, owner, escrow, payer, data)

    assert reason == RevertReason("InvalidSignature", ())


async def test_refund_with_a_high_s_signature_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 1_000, signer=owner
    )
    signature = data[-96:-31]  # the 65 signature bytes (padded to 96 in the calldata)
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    high_s = r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])

    reason = await refused(evm, dev, owner, escrow, payer, data[:-96] + high_s + data[-31:])

    assert reason == RevertReason("InvalidSignature", ())


async def test_refund_after_its_deadline_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    deadline = await deadline_in(evm, -1)
    data = await refund_call(
        evm,
        dev.factory,
        owner.address,
        salt,
        dev.token,
        payer,
        1_000,
        signer=owner,
        deadline=deadline,
    )

    reason = await refused(evm, dev, owner, escrow, payer, data)

    assert reason == RevertReason("DeadlineExpired", (deadline,))


async def test_refund_with_a_wrong_nonce_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 1_000, signer=owner, nonce=1
    )

    reason = await refused(evm, dev, owner, escrow, payer, data)

    assert reason == RevertReason("InvalidAccountNonce", (owner.address.lower(), 0))


async def test_replayed_refund_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 400, signer=owner
    )
    await send(evm, RELAYER_KEY, dev.factory, data)

    reason = await expect_revert(evm, RELAYER_KEY, dev.factory, data)

    assert reason == RevertReason("InvalidAccountNonce", (owner.address.lower(), 1))
    assert await token_balance(evm, dev.token, payer) == 400
    assert await token_balance(evm, dev.token, escrow) == 600


async def test_refund_of_more_than_the_escrow_holds_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, payer, 1_001, signer=owner
    )

    reason = await refused(evm, dev, owner, escrow, payer, data)

    assert reason == RevertReason("InsufficientBalance", (1_000, 1_001))


async def test_refund_to_the_escrow_itself_is_rejected(
    evm: EvmClient, dev: DevDeployment, funded: tuple[LocalAccount, bytes, str, str]
) -> None:
    owner, salt, escrow, payer = funded
    data = await refund_call(
        evm, dev.factory, owner.address, salt, dev.token, escrow, 10, signer=owner
    )

    reason = await refused(evm, dev, owner, escrow, payer, data)

    assert reason == RevertReason("InvalidRecipient", (escrow.lower(),))


async def test_a_native_refund_a_recipient_refuses_is_credited_to_it(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = Account.create()
    rejecter = await deploy_test_contract(evm, "EthRejecter")
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await pay_native(evm, escrow, 1_000)
    data = await refund_call(
        evm, dev.factory, owner.address, salt, None, rejecter, 10, signer=owner
    )

    receipt = await send(evm, RELAYER_KEY, dev.factory, data)

    assert factory_events(receipt, "NativeCredited") == [(rejecter, 10)]
    assert await native_credit(evm, dev.factory, rejecter) == 10
    assert await evm.get_balance(owner.address) == 990
    assert await evm.get_balance(escrow) == 0
    assert await factory_nonce(evm, dev.factory, owner.address) == 1


def ethers_sign_refund(*args: object) -> dict[str, str]:
    """{"signer", "digest", "signature"} of a Refund signed by ethers.js (tests/js)."""
    answer: dict[str, str] = run_node_script(SIGN_REFUND, *args)
    return answer


async def test_ethers_signed_refund_is_accepted_and_matches_the_python_typed_data(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payer = Account.create(), Account.create().address
    salt = new_salt()
    await pay_token(evm, dev.token, escrow_address(dev.factory, owner.address, salt), 2_000)
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 600)
    typed = refund_typed_data(
        chain_id, dev.factory, owner.address, salt, dev.token, payer, 1_500, 0, deadline
    )

    signed = ethers_sign_refund(
        "0x" + bytes(owner.key).hex(),
        chain_id,
        dev.factory,
        "0x" + salt.hex(),
        dev.token,
        payer,
        1_500,
        0,
        deadline,
    )
    signature = bytes.fromhex(signed["signature"][2:])
    data = encode_refund_meta(owner.address, salt, dev.token, payer, 1_500, 0, deadline, signature)

    assert signed["signer"] == owner.address
    assert bytes.fromhex(signed["digest"][2:]) == typed_digest(typed)
    await send(evm, RELAYER_KEY, dev.factory, data)
    assert await token_balance(evm, dev.token, payer) == 1_500
