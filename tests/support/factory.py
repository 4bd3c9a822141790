"""Driving the PaymentFactory on the test chain: signed messages, sends, reverts, balances."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from eth_abi.abi import decode, encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount

from invoicing.addresses import checksum_encode
from invoicing.chain.abi import event_data_types, event_topic
from invoicing.chain.answers import ContractRevert
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY, load_artifact
from invoicing.chain.calldata import encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.deploy import deploy_contract
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import RevertReason, decode_revert
from invoicing.hashing import keccak256
from tests.support.chain import read_view

FAILED_TX_GAS = 500_000
RELAYER_KEY = DEV_PRIVATE_KEYS[1]


def sign_typed(key: bytes | str, typed: dict[str, Any]) -> bytes:
    signed = Account.sign_message(encode_typed_data(full_message=typed), key)
    return bytes(signed.signature)


def typed_digest(typed: dict[str, Any]) -> bytes:
    """The EIP-712 digest of ``typed``: what a signer signs (``0x19 01 ‖ domain ‖ struct``)."""
    signable = encode_typed_data(full_message=typed)
    return keccak256(b"\x19" + signable.version + signable.header + signable.body)


async def deadline_in(evm: EvmClient, seconds: int) -> int:
    block = await evm.get_block("latest")
    return int(block["timestamp"], 16) + seconds


async def send(evm: EvmClient, key: str, to: str, data: bytes, value: int = 0) -> dict[str, Any]:
    receipt = await evm.transact(key, to, data, value=value)
    assert receipt["status"] == 1
    return receipt


async def expect_revert(evm: EvmClient, key: str, to: str, data: bytes) -> RevertReason:
    """The call reverts both simulated and mined; returns the decoded custom error."""
    sender = Account.from_key(key).address
    with pytest.raises(ContractRevert) as caught:
        await evm.eth_call(to, data, from_=sender)
    reason = decode_revert(caught.value.revert_data)
    assert reason is not None, caught.value.revert_data.hex()
    receipt = await evm.transact(key, to, data, gas=FAILED_TX_GAS)
    assert receipt["status"] == 0
    return reason


async def token_balance(evm: EvmClient, token: str, account: str) -> int:
    balance: int = await read_view(evm, token, ERC20, "balanceOf", account)
    return balance


async def native_credit(evm: EvmClient, factory: str, account: str) -> int:
    credit: int = await read_view(evm, factory, PAYMENT_FACTORY, "nativeCreditOf", account)
    return credit


async def deploy_test_contract(evm: EvmClient, name: str, *args: tuple[str, Any]) -> str:
    """Deploy a contract of contracts/test with constructor arguments given as (type, value)."""
    code = load_artifact(name).bytecode
    if args:
        code += encode([t for t, _ in args], [v for _, v in args])
    return await deploy_contract(evm, DEV_PRIVATE_KEYS[0], code)


def factory_events(receipt: dict[str, Any], name: str) -> list[tuple[Any, ...]]:
    """The factory events ``name`` in a receipt: (indexed topics as addresses or words..., data
    values...) for each, in log order."""
    topic = event_topic(PAYMENT_FACTORY, name)
    found = []
    for log in receipt["logs"]:
        topics = [bytes.fromhex(t[2:]) for t in log["topics"]]
        if topics[0] != topic:
            continue
        indexed = tuple(_topic_value(t) for t in topics[1:])
        values = decode(event_data_types(PAYMENT_FACTORY, name), bytes.fromhex(log["data"][2:]))
        found.append((*indexed, *(_plain(v) for v in values)))
    return found


def _topic_value(topic: bytes) -> str | bytes:
    """An indexed address as a checksummed address; any other word as its bytes."""
    return checksum_encode(topic[12:]) if topic[:12] == bytes(12) else topic


def _plain(value: Any) -> Any:
    return checksum_encode(bytes.fromhex(value[2:])) if isinstance(value, str) else value


async def factory_nonce(evm: EvmClient, factory: str, user: str) -> int:
    nonce: int = await read_view(evm, factory, PAYMENT_FACTORY, "nonces", user)
    return nonce


async def set_fee(
    evm: EvmClient, factory: str, owner: LocalAccount, fee_bps: int
) -> dict[str, Any]:
    """The owner signs SetFee at its current nonce; a relayer sends it. Its receipt."""
    return await _signed_setting(
        evm, factory, owner, fee_bps, set_fee_typed_data, encode_set_fee_meta
    )


async def set_payout(
    evm: EvmClient, factory: str, owner: LocalAccount, payout: str
) -> dict[str, Any]:
    """The owner signs SetPayout at its current nonce; a relayer sends it. Its receipt."""
    return await _signed_setting(
        evm, factory, owner, payout, set_payout_typed_data, encode_set_payout_meta
    )


async def _signed_setting(
    evm: EvmClient,
    factory: str,
    owner: LocalAccount,
    value: Any,
    typed_of: Callable[..., dict[str, Any]],
    encode_of: Callable[..., bytes],
) -> dict[str, Any]:
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    nonce = await factory_nonce(evm, factory, owner.address)
    signature = sign_typed(
        owner.key, typed_of(chain_id, factory, owner.address, value, nonce, deadline)
    )
    data = encode_of(owner.address, value, nonce, deadline, signature)
    return await send(evm, RELAYER_KEY, factory, data)


async def set_fee_and_payout(
    evm: EvmClient, factory: str, owner: LocalAccount, fee_bps: int, payout: str
) -> None:
    """The owner signs SetFee then SetPayout; a relayer sends both."""
    await set_fee(evm, factory, owner, fee_bps)
    await set_payout(evm, factory, owner, payout)
