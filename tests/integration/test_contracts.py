"""PaymentFactory on a real anvil: owner settings by EIP-712 signature, escrows, withdrawals."""

from __future__ import annotations

import os

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call, event_topic
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import PAYMENT_FACTORY, TEST_TOKEN, load_artifact
from invoicing.chain.calldata import (
    decode_balances_of,
    encode_balances_of,
    encode_set_fee_meta,
    encode_set_payout_meta,
    encode_withdraw,
)
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.chain.escrows import escrow_address
from invoicing.chain.events import Withdrawn, decode_withdrawn
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import RevertReason
from tests.support.chain import read_view
from tests.support.factory import (
    deadline_in,
    expect_revert,
    factory_events,
    native_credit,
    send,
    set_fee,
    set_payout,
    sign_typed,
    token_balance,
)

pytestmark = pytest.mark.integration

RELAYER_KEY = DEV_PRIVATE_KEYS[1]
PAYER_KEY = DEV_PRIVATE_KEYS[2]
CALLER_KEY = DEV_PRIVATE_KEYS[3]
CALLER = DEV_ADDRESSES[3]
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
ETH = 10**18


# --- helpers -----------------------------------------------------------------------------


def new_owner() -> LocalAccount:
    account: LocalAccount = Account.create()
    return account


def new_salt() -> bytes:
    return os.urandom(32)


async def fund_native(evm: EvmClient, escrow: str, amount: int) -> None:
    await send(evm, PAYER_KEY, escrow, b"", value=amount)


async def fund_token(evm: EvmClient, token: str, escrow: str, amount: int) -> None:
    await send(evm, PAYER_KEY, token, encode_call(TEST_TOKEN, "transfer", escrow, amount))


async def withdraw(
    evm: EvmClient, factory: str, owner: str, token: str, salts: list[bytes]
) -> list[Withdrawn]:
    receipt = await send(evm, CALLER_KEY, factory, encode_withdraw(owner, token, salts))
    return [w for log in receipt["logs"] if (w := decode_withdrawn(log)) is not None]


async def setting_state(evm: EvmClient, factory: str, user: str) -> tuple[int, int, str]:
    """(nonce, feeBps, payout) of a user, to show a rejected call changed nothing."""
    return (
        await read_view(evm, factory, PAYMENT_FACTORY, "nonces", user),
        await read_view(evm, factory, PAYMENT_FACTORY, "feeBpsOf", user),
        await read_view(evm, factory, PAYMENT_FACTORY, "payoutOf", user),
    )


async def deploy_wallet(evm: EvmClient, signer: str) -> str:
    """A MockERC1271Wallet whose signatures are valid when ``signer`` signed."""
    code = load_artifact("MockERC1271Wallet").bytecode + encode(["address"], [signer])
    return await deploy_contract(evm, DEV_PRIVATE_KEYS[0], code)


def set_blocked(account: str, blocked: bool) -> bytes:
    """BlockingToken.setBlocked calldata."""
    return encode_call("BlockingToken", "setBlocked", account, blocked)


def flip_to_high_s(signature: bytes) -> bytes:
    """The malleable twin of a signature: s -> n - s with v toggled (recovers the same key)."""
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    return r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])


# --- owner settings ----------------------------------------------------------------------


async def test_set_fee_meta_by_any_relayer_sets_fee_and_uses_nonce(
    evm: EvmClient, factory: str
) -> None:
    owner = new_owner()

    receipt = await set_fee(evm, factory, owner, 250)

    assert await setting_state(evm, factory, owner.address) == (1, 250, ZERO_ADDRESS)
    (log,) = receipt["logs"]
    assert bytes.fromhex(log["topics"][0][2:]) == event_topic(PAYMENT_FACTORY, "FeeSet")
    assert to_checksum_address("0x" + log["topics"][1][-40:]) == owner.address
    assert int(log["data"][2:66], 16) == 250  # feeBps
    assert int(log["data"][66:130], 16) == 0  # nonce used


async def test_set_payout_meta_shares_the_nonce_with_set_fee(evm: EvmClient, factory: str) -> None:
    owner, payout = new_owner(), new_owner().address
    await set_fee(evm, factory, owner, 500)

    receipt = await set_payout(evm, factory, owner, payout)

    assert await setting_state(evm, factory, owner.address) == (2, 500, payout)
    (log,) = receipt["logs"]
    assert bytes.fromhex(log["topics"][0][2:]) == event_topic(PAYMENT_FACTORY, "PayoutSet")
    assert to_checksum_address("0x" + log["data"][26:66]) == payout
    assert int(log["data"][66:130], 16) == 1  # nonce used


async def test_wrong_nonce_is_rejected(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 100, 1, deadline)
    data = encode_set_fee_meta(owner.address, 100, 1, deadline, sign_typed(owner.key, typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("InvalidAccountNonce", (owner.address.lower(), 0))
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_expired_deadline_is_rejected(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, -1)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 100, 0, deadline)
    data = encode_set_fee_meta(owner.address, 100, 0, deadline, sign_typed(owner.key, typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("DeadlineExpired", (deadline,))
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_expired_deadline_is_rejected_for_set_payout(evm: EvmClient, factory: str) -> None:
    owner, payout = new_owner(), new_owner().address
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, -1)
    typed = set_payout_typed_data(chain_id, factory, owner.address, payout, 0, deadline)
    data = encode_set_payout_meta(owner.address, payout, 0, deadline, sign_typed(owner.key, typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("DeadlineExpired", (deadline,))
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_fee_above_500_bps_is_rejected(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 501, 0, deadline)
    data = encode_set_fee_meta(owner.address, 501, 0, deadline, sign_typed(owner.key, typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("FeeTooHigh", (501,))
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_signature_by_another_key_is_rejected(evm: EvmClient, factory: str) -> None:
    owner, intruder = new_owner(), new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_payout_typed_data(chain_id, factory, owner.address, intruder.address, 0, deadline)
    signature = sign_typed(intruder.key, typed)
    data = encode_set_payout_meta(owner.address, intruder.address, 0, deadline, signature)

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("InvalidSignature", ())
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_signature_for_other_values_is_rejected(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 10, 0, deadline)
    data = encode_set_fee_meta(owner.address, 500, 0, deadline, sign_typed(owner.key, typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("InvalidSignature", ())
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)


async def test_high_s_signature_is_rejected_and_low_s_twin_accepted(
    evm: EvmClient, factory: str
) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 42, 0, deadline)
    low_s = sign_typed(owner.key, typed)
    high_s = flip_to_high_s(low_s)
    assert high_s != low_s

    reason = await expect_revert(
        evm, RELAYER_KEY, factory, encode_set_fee_meta(owner.address, 42, 0, deadline, high_s)
    )

    assert reason == RevertReason("InvalidSignature", ())
    assert await setting_state(evm, factory, owner.address) == (0, 0, ZERO_ADDRESS)
    await send(
        evm, RELAYER_KEY, factory, encode_set_fee_meta(owner.address, 42, 0, deadline, low_s)
    )
    assert await setting_state(evm, factory, owner.address) == (1, 42, ZERO_ADDRESS)


async def test_replayed_signature_is_rejected(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    typed = set_fee_typed_data(chain_id, factory, owner.address, 300, 0, deadline)
    data = encode_set_fee_meta(owner.address, 300, 0, deadline, sign_typed(owner.key, typed))
    await send(evm, RELAYER_KEY, factory, data)
    await set_fee(evm, factory, owner, 100)  # the owner changes their mind (nonce 1)

    reason = await expect_revert(evm, RELAYER_KEY, factory, data)

    assert reason == RevertReason("InvalidAccountNonce", (owner.address.lower(), 2))
    assert await setting_state(evm, factory, owner.address) == (2, 100, ZERO_ADDRESS)


async def test_eip1271_contract_wallet_sets_its_fee_and_payout(
    evm: EvmClient, factory: str
) -> None:
    signer, stranger, payout = new_owner(), new_owner(), new_owner().address
    wallet = await deploy_wallet(evm, signer.address)
    chain_id, deadline = await evm.chain_id(), await deadline_in(evm, 3600)
    fee_typed = set_fee_typed_data(chain_id, factory, wallet, 75, 0, deadline)
    by_stranger = encode_set_fee_meta(wallet, 75, 0, deadline, sign_typed(stranger.key, fee_typed))

    reason = await expect_revert(evm, RELAYER_KEY, factory, by_stranger)
    assert reason == RevertReason("InvalidSignature", ())
    await send(
        evm,
        RELAYER_KEY,
        factory,
        encode_set_fee_meta(wallet, 75, 0, deadline, sign_typed(signer.key, fee_typed)),
    )
    payout_typed = set_payout_typed_data(chain_id, factory, wallet, payout, 1, deadline)
    await send(
        evm,
        RELAYER_KEY,
        factory,
        encode_set_payout_meta(wallet, payout, 1, deadline, sign_typed(signer.key, payout_typed)),
    )

    assert await setting_state(evm, factory, wallet) == (2, 75, payout)


async def test_typed_data_digest_matches_the_contract_domain(evm: EvmClient, factory: str) -> None:
    chain_id = await evm.chain_id()
    typed = set_fee_typed_data(chain_id, factory, DEV_ADDRESSES[0], 1, 0, 1)

    on_chain = await evm.eth_call(factory, encode_call(PAYMENT_FACTORY, "DOMAIN_SEPARATOR"))

    assert encode_typed_data(full_message=typed).header == on_chain


# --- escrow addresses and balances -------------------------------------------------------


async def test_escrow_address_matches_predict_escrow(evm: EvmClient, factory: str) -> None:
    for _ in range(5):
        owner, salt = new_owner().address, new_salt()

        predicted = await read_view(evm, factory, PAYMENT_FACTORY, "predictEscrow", owner, salt)

        assert predicted == escrow_address(factory, owner, salt)


async def test_balances_of_agrees_with_node_for_funded_and_empty_accounts(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner().address
    escrows = [escrow_address(dev.factory, owner, new_salt()) for _ in range(4)]
    await fund_native(evm, escrows[0], 123)
    await fund_token(evm, dev.token, escrows[1], 456)
    await fund_native(evm, escrows[3], 7 * ETH)
    await fund_token(evm, dev.token, escrows[3], 8_000_000)
    accounts = [*escrows, DEV_ADDRESSES[4], ZERO_ADDRESS]

    native = decode_balances_of(
        await evm.eth_call(dev.factory, encode_balances_of(ZERO_ADDRESS, accounts))
    )
    tokens = decode_balances_of(
        await evm.eth_call(dev.factory, encode_balances_of(dev.token, accounts))
    )

    assert native[:4] == [123, 0, 0, 7 * ETH]
    assert native == [await evm.get_balance(a) for a in accounts]
    assert tokens[:4] == [0, 456, 0, 8_000_000]
    assert tokens == [await token_balance(evm, dev.token, a) for a in accounts]


# --- withdrawals -------------------------------------------------------------------------


async def test_withdraw_native_without_payout_pays_everything_to_owner(
    evm: EvmClient, factory: str
) -> None:
    owner = new_owner()
    await set_fee(evm, factory, owner, 500)  # a fee without a payout address is not charged
    salts = [new_salt() for _ in range(3)]
    escrows = [escrow_address(factory, owner.address, s) for s in salts]
    for escrow, amount in zip(escrows, (1 * ETH, 2, 3_000_000_000), strict=True):
        await fund_native(evm, escrow, amount)
    caller_before = await evm.get_balance(CALLER)

    events = await withdraw(evm, factory, owner.address, ZERO_ADDRESS, salts)

    total = 1 * ETH + 2 + 3_000_000_000
    assert events == [Withdrawn(owner.address, ZERO_ADDRESS, 3, total, 0)]
    assert await evm.get_balance(owner.address) == total
    assert [await evm.get_balance(e) for e in escrows] == [0, 0, 0]
    assert [await evm.get_code(e) for e in escrows] == [b"", b"", b""]
    assert await evm.get_balance(factory) == 0
    assert await evm.get_balance(CALLER) < caller_before  # the caller only paid gas


async def test_withdraw_native_splits_fee_to_payout(evm: EvmClient, factory: str) -> None:
    owner, payout = new_owner(), new_owner().address
    await set_fee(evm, factory, owner, 250)
    await set_payout(evm, factory, owner, payout)
    salts = [new_salt(), new_salt()]
    await fund_native(evm, escrow_address(factory, owner.address, salts[0]), 3 * ETH)
    await fund_native(evm, escrow_address(factory, owner.address, salts[1]), 999)

    events = await withdraw(evm, factory, owner.address, ZERO_ADDRESS, salts)

    total = 3 * ETH + 999
    fee = total * 250 // 10_000
    assert events == [Withdrawn(owner.address, ZERO_ADDRESS, 2, total, fee)]
    assert await evm.get_balance(payout) == fee == 75_000_000_000_000_024
    assert await evm.get_balance(owner.address) == total - fee


async def test_withdraw_with_payout_but_zero_fee_pays_everything_to_owner(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payout = new_owner(), new_owner().address
    await set_payout(evm, dev.factory, owner, payout)
    salt = new_salt()
    await fund_token(evm, dev.token, escrow_address(dev.factory, owner.address, salt), 5_000_000)

    events = await withdraw(evm, dev.factory, owner.address, dev.token, [salt])

    assert events == [Withdrawn(owner.address, dev.token, 1, 5_000_000, 0)]
    assert await token_balance(evm, dev.token, owner.address) == 5_000_000
    assert await token_balance(evm, dev.token, payout) == 0


async def test_withdraw_erc20_without_payout(evm: EvmClient, dev: DevDeployment) -> None:
    owner = new_owner()
    salts = [new_salt() for _ in range(3)]
    escrows = [escrow_address(dev.factory, owner.address, s) for s in salts]
    await fund_token(evm, dev.token, escrows[0], 10_000_000)
    await fund_token(evm, dev.token, escrows[2], 1)  # escrows[1] was never paid
    factory_before = await token_balance(evm, dev.token, dev.factory)

    events = await withdraw(evm, dev.factory, owner.address, dev.token, salts)

    assert events == [Withdrawn(owner.address, dev.token, 3, 10_000_001, 0)]
    assert await token_balance(evm, dev.token, owner.address) == 10_000_001
    assert [await token_balance(evm, dev.token, e) for e in escrows] == [0, 0, 0]
    assert await token_balance(evm, dev.token, dev.factory) == factory_before == 0


async def test_withdraw_erc20_splits_fee_to_payout(evm: EvmClient, dev: DevDeployment) -> None:
    owner, payout = new_owner(), new_owner().address
    await set_payout(evm, dev.factory, owner, payout)
    await set_fee(evm, dev.factory, owner, 125)
    salts = [new_salt(), new_salt()]
    await fund_token(evm, dev.token, escrow_address(dev.factory, owner.address, salts[0]), 7_777)
    await fund_token(evm, dev.token, escrow_address(dev.factory, owner.address, salts[1]), 3)

    events = await withdraw(evm, dev.factory, owner.address, dev.token, salts)

    assert events == [Withdrawn(owner.address, dev.token, 2, 7_780, 97)]  # 7780 * 1.25 %
    assert await token_balance(evm, dev.token, payout) == 97
    assert await token_balance(evm, dev.token, owner.address) == 7_683


async def test_erc20_withdraw_also_pays_out_native_coin_in_the_escrows(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner()
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await fund_token(evm, dev.token, escrow, 40)
    await fund_native(evm, escrow, 41)

    events = await withdraw(evm, dev.factory, owner.address, dev.token, [salt])

    assert events == [
        Withdrawn(owner.address, dev.token, 1, 40, 0),
        Withdrawn(owner.address, ZERO_ADDRESS, 1, 41, 0),
    ]
    assert await token_balance(evm, dev.token, owner.address) == 40
    assert await evm.get_balance(owner.address) == 41
    assert await evm.get_balance(dev.factory) == 0


async def test_native_withdraw_leaves_tokens_for_a_later_token_withdraw(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner()
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await fund_token(evm, dev.token, escrow, 12)

    first = await withdraw(evm, dev.factory, owner.address, ZERO_ADDRESS, [salt])
    second = await withdraw(evm, dev.factory, owner.address, dev.token, [salt])

    assert first == [Withdrawn(owner.address, ZERO_ADDRESS, 1, 0, 0)]
    assert second == [Withdrawn(owner.address, dev.token, 1, 12, 0)]
    assert await token_balance(evm, dev.token, owner.address) == 12


async def test_any_caller_withdraws_but_funds_go_to_owner_and_payout(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner, payout = new_owner(), new_owner().address
    await set_payout(evm, dev.factory, owner, payout)
    await set_fee(evm, dev.factory, owner, 100)
    salt = new_salt()
    await fund_token(evm, dev.token, escrow_address(dev.factory, owner.address, salt), 1_000)
    caller_tokens = await token_balance(evm, dev.token, CALLER)

    await withdraw(evm, dev.factory, owner.address, dev.token, [salt])  # sent by CALLER

    assert await token_balance(evm, dev.token, CALLER) == caller_tokens
    assert await token_balance(evm, dev.token, owner.address) == 990
    assert await token_balance(evm, dev.token, payout) == 10


async def test_salts_of_another_owner_sweep_nothing(evm: EvmClient, dev: DevDeployment) -> None:
    victim, thief = new_owner(), new_owner()
    salt = new_salt()
    escrow = escrow_address(dev.factory, victim.address, salt)
    await fund_native(evm, escrow, 5_000)

    events = await withdraw(evm, dev.factory, thief.address, ZERO_ADDRESS, [salt])

    assert events == [Withdrawn(thief.address, ZERO_ADDRESS, 1, 0, 0)]
    assert await evm.get_balance(thief.address) == 0
    assert await evm.get_balance(escrow) == 5_000


async def test_funds_arriving_after_a_sweep_are_swept_again(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner()
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner.address, salt)
    await fund_native(evm, escrow, 100)
    await fund_token(evm, dev.token, escrow, 200)
    await withdraw(evm, dev.factory, owner.address, ZERO_ADDRESS, [salt])
    await withdraw(evm, dev.factory, owner.address, dev.token, [salt])
    await fund_native(evm, escrow, 1_000)
    await fund_token(evm, dev.token, escrow, 2_000)

    native = await withdraw(evm, dev.factory, owner.address, ZERO_ADDRESS, [salt])
    tokens = await withdraw(evm, dev.factory, owner.address, dev.token, [salt])

    assert native == [Withdrawn(owner.address, ZERO_ADDRESS, 1, 1_000, 0)]
    assert tokens == [Withdrawn(owner.address, dev.token, 1, 2_000, 0)]
    assert await evm.get_balance(owner.address) == 1_100
    assert await token_balance(evm, dev.token, owner.address) == 2_200
    assert await evm.get_code(escrow) == b""


async def test_blocking_token_escrow_does_not_revert_the_batch(
    evm: EvmClient, factory: str
) -> None:
    owner = new_owner()
    blocking_token = load_artifact("BlockingToken").bytecode
    token = await deploy_contract(evm, DEV_PRIVATE_KEYS[0], blocking_token)
    salts = [new_salt() for _ in range(3)]
    escrows = [escrow_address(factory, owner.address, s) for s in salts]
    for escrow, amount in zip(escrows, (10, 20, 30), strict=True):
        await send(evm, PAYER_KEY, token, encode_call(TEST_TOKEN, "mint", escrow, amount))
    await fund_native(evm, escrows[1], 5)
    await send(evm, PAYER_KEY, token, set_blocked(escrows[1], True))

    events = await withdraw(evm, factory, owner.address, token, salts)

    assert events == [
        Withdrawn(owner.address, token, 3, 40, 0),
        Withdrawn(owner.address, ZERO_ADDRESS, 3, 5, 0),
    ]
    assert [await token_balance(evm, token, e) for e in escrows] == [0, 20, 0]
    assert await token_balance(evm, token, owner.address) == 40
    assert await evm.get_balance(owner.address) == 5

    await send(evm, PAYER_KEY, token, set_blocked(escrows[1], False))
    events = await withdraw(evm, factory, owner.address, token, [salts[1]])
    assert events == [Withdrawn(owner.address, token, 1, 20, 0)]
    assert await token_balance(evm, token, owner.address) == 60


async def test_empty_batch_succeeds_with_zero_total(evm: EvmClient, factory: str) -> None:
    owner = new_owner().address

    events = await withdraw(evm, factory, owner, ZERO_ADDRESS, [])

    assert events == [Withdrawn(owner, ZERO_ADDRESS, 0, 0, 0)]


async def test_native_coin_an_owner_rejects_is_credited_to_it_and_the_sweep_succeeds(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = dev.token  # a contract without receive()
    salt = new_salt()
    escrow = escrow_address(dev.factory, owner, salt)
    await fund_native(evm, escrow, 77)

    receipt = await send(evm, CALLER_KEY, dev.factory, encode_withdraw(owner, ZERO_ADDRESS, [salt]))

    assert factory_events(receipt, "NativeCredited") == [(owner, 77)]
    assert await evm.get_balance(escrow) == 0
    assert await native_credit(evm, dev.factory, owner) == 77


async def test_duplicate_salt_in_a_batch_is_skipped_cheaply(evm: EvmClient, factory: str) -> None:
    owner = new_owner()
    salts = [new_salt(), new_salt()]
    for salt, amount in zip(salts, (1_000, 2_000), strict=True):
        await fund_native(evm, escrow_address(factory, owner.address, salt), amount)
    data = encode_withdraw(owner.address, ZERO_ADDRESS, [salts[0], salts[0], salts[1]])

    receipt = await send(evm, CALLER_KEY, factory, data)

    events = [w for log in receipt["logs"] if (w := decode_withdrawn(log)) is not None]
    assert events == [Withdrawn(owner.address, ZERO_ADDRESS, 3, 3_000, 0)]
    assert await evm.get_balance(owner.address) == 3_000
    # A colliding CREATE2 would have burnt 63/64 of the gas left (millions).
    assert receipt["gasUsed"] < 200_000
