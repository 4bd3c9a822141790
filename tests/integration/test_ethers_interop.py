"""Signatures made by ethers.js (as a wallet or dApp would) are accepted by the factory."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.calldata import encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.chain.evm import EvmClient
from tests.support.chain import read_view
from tests.support.factory import typed_digest
from tests.support.node import run_node_script

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SIGN_META = REPO_ROOT / "tests" / "js" / "sign_meta.mjs"
RELAYER_KEY = DEV_PRIVATE_KEYS[1]


def ethers_sign(*args: object) -> dict[str, dict[str, str]]:
    answer: dict[str, dict[str, str]] = run_node_script(SIGN_META, *args)
    return answer


async def test_ethers_signatures_are_accepted_by_the_factory(evm: EvmClient, factory: str) -> None:
    owner = Account.create()
    payout = Account.create().address
    chain_id = await evm.chain_id()
    block = await evm.get_block("latest")
    deadline = int(block["timestamp"], 16) + 600
    fee_typed = set_fee_typed_data(chain_id, factory, owner.address, 321, 0, deadline)
    payout_typed = set_payout_typed_data(chain_id, factory, owner.address, payout, 1, deadline)

    signed = ethers_sign(
        "0x" + bytes(owner.key).hex(), chain_id, factory, 321, 0, payout, 1, deadline
    )

    assert signed["signer"] == owner.address
    assert bytes.fromhex(signed["setFee"]["digest"][2:]) == typed_digest(fee_typed)
    assert bytes.fromhex(signed["setPayout"]["digest"][2:]) == typed_digest(payout_typed)
    fee_signature = bytes.fromhex(signed["setFee"]["signature"][2:])
    payout_signature = bytes.fromhex(signed["setPayout"]["signature"][2:])
    fee_call = encode_set_fee_meta(owner.address, 321, 0, deadline, fee_signature)
    payout_call = encode_set_payout_meta(owner.address, payout, 1, deadline, payout_signature)
    assert (await evm.transact(RELAYER_KEY, factory, fee_call))["status"] == 1
    assert (await evm.transact(RELAYER_KEY, factory, payout_call))["status"] == 1
    assert await read_view(evm, factory, PAYMENT_FACTORY, "nonces", owner.address) == 2
    assert await read_view(evm, factory, PAYMENT_FACTORY, "feeBpsOf", owner.address) == 321
    assert await read_view(evm, factory, PAYMENT_FACTORY, "payoutOf", owner.address) == payout
