"""The dev token's EIP-3009 transfers with authorization and EIP-2612 permit, on anvil, with
signatures made by eth-account and by ethers.js (as a wallet would make them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from eth_abi.abi import encode
from eth_account import Account

from invoicing.chain.abi import event_topic, selector, signature
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN, load_artifact
from invoicing.chain.deploy import TEST_TOKEN_EIP712, DevDeployment
from invoicing.chain.eip3009 import (
    TRANSFER_BYTES_SELECTOR,
    TRANSFER_VRS_SELECTOR,
    Authorization,
    domain_separator,
    encode_authorization_state,
    encode_transfer_with_authorization,
    transfer_typed_data,
)
from invoicing.chain.evm import EvmClient
from tests.support.chain import read_view
from tests.support.factory import (
    deadline_in,
    deploy_test_contract,
    expect_revert,
    send,
    sign_typed,
    token_balance,
    typed_digest,
)
from tests.support.node import run_node_script

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SIGN = REPO_ROOT / "tests" / "js" / "sign_authorization.mjs"
RELAYER_KEY = DEV_PRIVATE_KEYS[1]


def signed_typed(key: str, typed: dict[str, object]) -> bytes:
    return sign_typed(key, typed)


async def funded_payer(evm: EvmClient, dev: DevDeployment, amount: int) -> tuple[str, str]:
    """A fresh wallet holding ``amount`` TUSD and no native coin."""
    payer = Account.create()
    mint = selector("mint(address,uint256)") + encode(
        ["address", "uint256"], [payer.address, amount]
    )
    await send(evm, DEV_PRIVATE_KEYS[0], dev.token, mint)
    return "0x" + bytes(payer.key).hex(), payer.address


async def authorization_for(
    evm: EvmClient, payer: str, to: str, value: int, *, after: int = -60, before: int = 600
) -> Authorization:
    now = await deadline_in(evm, 0)
    return Authorization(payer, to, value, now + after, now + before, os.urandom(32))


async def used(evm: EvmClient, token: str, authorizer: str, nonce: bytes) -> bool:
    raw = await evm.eth_call(token, encode_authorization_state(authorizer, nonce))
    return raw[-1] == 1


async def test_the_domain_separator_is_test_usd_version_1(
    evm: EvmClient, dev: DevDeployment
) -> None:
    found = await read_view(evm, dev.token, TEST_TOKEN, "DOMAIN_SEPARATOR")
    assert found == domain_separator(TEST_TOKEN_EIP712, dev.chain_id, dev.token)
    assert await read_view(evm, dev.token, TEST_TOKEN, "name") == "Test USD"
    # The selectors the service writes out are the token's own.
    functions = [e for e in load_artifact(TEST_TOKEN).abi if e["type"] == "function"]
    selectors = {selector(signature(e)) for e in functions}
    assert {TRANSFER_VRS_SELECTOR, TRANSFER_BYTES_SELECTOR} <= selectors


async def test_anyone_submits_a_signed_transfer_once(evm: EvmClient, dev: DevDeployment) -> None:
    key, payer = await funded_payer(evm, dev, 5_000_000)
    payee = Account.create().address
    auth = await authorization_for(evm, payer, payee, 1_250_000)
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    call = encode_transfer_with_authorization(auth, signed_typed(key, typed))

    receipt = await send(evm, RELAYER_KEY, dev.token, call)

    assert await token_balance(evm, dev.token, payee) == 1_250_000
    assert await token_balance(evm, dev.token, payer) == 3_750_000
    assert await used(evm, dev.token, payer, auth.nonce)
    used_topic = event_topic(TEST_TOKEN, "AuthorizationUsed")
    logs = [log for log in receipt["logs"] if log["topics"][0] == "0x" + used_topic.hex()]
    assert len(logs) == 1 and logs[0]["topics"][2] == "0x" + auth.nonce.hex()
    # The same authorization again: refused, nothing moves.
    reason = await expect_revert(evm, RELAYER_KEY, dev.token, call)
    assert reason.name == "AuthorizationUsedOrCanceled"
    assert await token_balance(evm, dev.token, payee) == 1_250_000


async def test_the_validity_window_is_strict(evm: EvmClient, dev: DevDeployment) -> None:
    key, payer = await funded_payer(evm, dev, 1_000_000)
    payee = Account.create().address
    for after, before, error in (
        (3_600, 7_200, "AuthorizationNotYetValid"),
        (-7_200, -60, "AuthorizationExpired"),
    ):
        auth = await authorization_for(evm, payer, payee, 1, after=after, before=before)
        typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
        call = encode_transfer_with_authorization(auth, signed_typed(key, typed))
        assert (await expect_revert(evm, RELAYER_KEY, dev.token, call)).name == error
    assert await token_balance(evm, dev.token, payee) == 0


async def test_a_signature_of_anyone_else_or_other_terms_is_refused(
    evm: EvmClient, dev: DevDeployment
) -> None:
    key, payer = await funded_payer(evm, dev, 1_000_000)
    payee = Account.create().address
    auth = await authorization_for(evm, payer, payee, 10)
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    stranger = signed_typed(DEV_PRIVATE_KEYS[5], typed)
    assert (
        await expect_revert(
            evm, RELAYER_KEY, dev.token, encode_transfer_with_authorization(auth, stranger)
        )
    ).name == "InvalidAuthorizationSignature"
    # Signed for 10, submitted for 11.
    signature = signed_typed(key, typed)
    more = Authorization(payer, payee, 11, auth.valid_after, auth.valid_before, auth.nonce)
    assert (
        await expect_revert(
            evm, RELAYER_KEY, dev.token, encode_transfer_with_authorization(more, signature)
        )
    ).name == "InvalidAuthorizationSignature"
    # Another chain's domain.
    other = signed_typed(key, transfer_typed_data(TEST_TOKEN_EIP712, 1, dev.token, auth))
    assert (
        await expect_revert(
            evm, RELAYER_KEY, dev.token, encode_transfer_with_authorization(auth, other)
        )
    ).name == "InvalidAuthorizationSignature"
    assert not await used(evm, dev.token, payer, auth.nonce)


async def test_a_contract_wallet_signs_by_eip1271(evm: EvmClient, dev: DevDeployment) -> None:
    owner = Account.create()
    wallet = await deploy_test_contract(evm, "MockERC1271Wallet", ("address", owner.address))
    mint = selector("mint(address,uint256)") + encode(["address", "uint256"], [wallet, 500])
    await send(evm, DEV_PRIVATE_KEYS[0], dev.token, mint)
    payee = Account.create().address
    auth = await authorization_for(evm, wallet, payee, 500)
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    # 66 bytes: not an EOA signature, so the bytes overload asks the wallet.
    signature = signed_typed("0x" + bytes(owner.key).hex(), typed) + b"\x00"
    bad = encode_transfer_with_authorization(auth, signature)
    assert (await expect_revert(evm, RELAYER_KEY, dev.token, bad)).name == (
        "InvalidAuthorizationSignature"
    )
    call = encode_transfer_with_authorization(auth, signature[:65])
    # A 65-byte signature goes as v, r, s, which SignatureChecker also hands to the wallet.
    await send(evm, RELAYER_KEY, dev.token, call)
    assert await token_balance(evm, dev.token, payee) == 500


async def test_receive_is_for_the_payee_alone(evm: EvmClient, dev: DevDeployment) -> None:
    key, payer = await funded_payer(evm, dev, 1_000)
    payee_key, payee = DEV_PRIVATE_KEYS[6], DEV_ADDRESSES[6]
    before = await token_balance(evm, dev.token, payee)
    auth = await authorization_for(evm, payer, payee, 700)
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    typed["types"]["ReceiveWithAuthorization"] = typed["types"].pop("TransferWithAuthorization")
    typed["primaryType"] = "ReceiveWithAuthorization"
    signature = signed_typed(key, typed)
    v, r, s = signature[64], signature[:32], signature[32:64]
    types = ["address", "address", "uint256", "uint256", "uint256", "bytes32"]
    types += ["uint8", "bytes32", "bytes32"]
    receive = f"receiveWithAuthorization({','.join(types)})"
    args = [payer, payee, 700, auth.valid_after, auth.valid_before, auth.nonce, v, r, s]
    call = selector(receive) + encode(types, args)
    assert (await expect_revert(evm, RELAYER_KEY, dev.token, call)).name == "CallerMustBePayee"
    await send(evm, payee_key, dev.token, call)
    assert await token_balance(evm, dev.token, payee) == before + 700


async def test_a_canceled_authorization_cannot_be_used(evm: EvmClient, dev: DevDeployment) -> None:
    key, payer = await funded_payer(evm, dev, 1_000)
    payee = Account.create().address
    auth = await authorization_for(evm, payer, payee, 400)
    transfer = encode_transfer_with_authorization(
        auth,
        signed_typed(key, transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)),
    )
    cancel_typed = {
        "types": {
            "EIP712Domain": transfer_typed_data(TEST_TOKEN_EIP712, 0, dev.token, auth)["types"][
                "EIP712Domain"
            ],
            "CancelAuthorization": [
                {"name": "authorizer", "type": "address"},
                {"name": "nonce", "type": "bytes32"},
            ],
        },
        "primaryType": "CancelAuthorization",
        "domain": {
            "name": "Test USD",
            "version": "1",
            "chainId": dev.chain_id,
            "verifyingContract": dev.token,
        },
        "message": {"authorizer": payer, "nonce": "0x" + auth.nonce.hex()},
    }
    cancel = selector("cancelAuthorization(address,bytes32,bytes)") + encode(
        ["address", "bytes32", "bytes"], [payer, auth.nonce, signed_typed(key, cancel_typed)]
    )
    await send(evm, RELAYER_KEY, dev.token, cancel)
    assert await used(evm, dev.token, payer, auth.nonce)
    assert (await expect_revert(evm, RELAYER_KEY, dev.token, transfer)).name == (
        "AuthorizationUsedOrCanceled"
    )
    assert await token_balance(evm, dev.token, payee) == 0


def ethers_sign(*args: object) -> dict[str, dict[str, str]]:
    answer: dict[str, dict[str, str]] = run_node_script(SIGN, *args)
    return answer


def digest(typed: dict[str, object]) -> str:
    return "0x" + typed_digest(typed).hex()


async def test_ethers_signatures_transfer_and_permit(evm: EvmClient, dev: DevDeployment) -> None:
    key, payer = await funded_payer(evm, dev, 2_000_000)
    payee = Account.create().address
    spender_key, spender = DEV_PRIVATE_KEYS[7], DEV_ADDRESSES[7]
    auth = await authorization_for(evm, payer, payee, 900_000)
    deadline = await deadline_in(evm, 600)
    permit_nonce = await read_view(evm, dev.token, TEST_TOKEN, "nonces", payer)
    signed = ethers_sign(
        key, dev.chain_id, dev.token, "Test USD", "1", payee, 900_000, auth.valid_after,
        auth.valid_before, "0x" + auth.nonce.hex(), spender, permit_nonce, deadline,
    )  # fmt: skip

    assert signed["signer"] == payer
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    assert signed["transfer"]["digest"] == digest(typed)
    signature = bytes.fromhex(signed["transfer"]["signature"][2:])
    await send(evm, RELAYER_KEY, dev.token, encode_transfer_with_authorization(auth, signature))
    assert await token_balance(evm, dev.token, payee) == 900_000

    permit = bytes.fromhex(signed["permit"]["signature"][2:])
    call = selector("permit(address,address,uint256,uint256,uint8,bytes32,bytes32)") + encode(
        ["address", "address", "uint256", "uint256", "uint8", "bytes32", "bytes32"],
        [payer, spender, 900_000, deadline, permit[64], permit[:32], permit[32:64]],
    )
    await send(evm, RELAYER_KEY, dev.token, call)
    assert await read_view(evm, dev.token, TEST_TOKEN, "allowance", payer, spender) == 900_000
    assert await read_view(evm, dev.token, TEST_TOKEN, "nonces", payer) == permit_nonce + 1
    # The permit is used once: the spender takes it, and the same permit again is refused.
    take = selector("transferFrom(address,address,uint256)") + encode(
        ["address", "address", "uint256"], [payer, spender, 900_000]
    )
    await send(evm, spender_key, dev.token, take)
    assert await token_balance(evm, dev.token, payer) == 200_000
    assert (await expect_revert(evm, RELAYER_KEY, dev.token, call)).name == "ERC2612InvalidSigner"
