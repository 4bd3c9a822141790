"""The factory against hostile contracts on a real anvil: a token's balanceOf
cannot stall the batched balance read, and native coin an owner refuses cannot block a sweep."""

from __future__ import annotations

import os

import pytest
from eth_account import Account

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import PAYMENT_FACTORY, TEST_TOKEN
from invoicing.chain.calldata import (
    UNREADABLE,
    decode_balances_of,
    encode_balances_of,
    encode_withdraw,
)
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.chain.reverts import RevertReason
from invoicing.errors import ChainUnavailable
from tests.support.chain import CappedEvm, read_view
from tests.support.factory import (
    deploy_test_contract,
    expect_revert,
    factory_events,
    native_credit,
    send,
    set_fee_and_payout,
    token_balance,
)

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[2]
CALLER_KEY = DEV_PRIVATE_KEYS[3]
LOOPS, HUGE_ANSWER, REVERTS, BIG_BALANCE, SHORT_ANSWER, LONG_ANSWER = range(6)
ETH = 10**18


async def hostile_token(evm: EvmClient, mode: int) -> str:
    return await deploy_test_contract(evm, "HostileToken", ("uint256", mode))


async def read(evm: EvmClient, factory: str, token: str, accounts: list[str]) -> list[int | None]:
    return decode_balances_of(await evm.eth_call(factory, encode_balances_of(token, accounts)))


def fresh_accounts(count: int) -> list[str]:
    return [Account.create().address for _ in range(count)]


# --- balancesOf -------------------------------------------------------------------------


async def test_unreadable_is_type_uint256_max_on_the_contract(evm: EvmClient, factory: str) -> None:
    assert await read_view(evm, factory, PAYMENT_FACTORY, "UNREADABLE") == UNREADABLE
    assert await read_view(evm, factory, PAYMENT_FACTORY, "BALANCE_OF_GAS") == 30_000


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (LOOPS, None),
        (HUGE_ANSWER, None),  # 1 MB cannot be answered within the 30k stipend
        (REVERTS, None),
        (SHORT_ANSWER, None),  # 31 bytes
        (BIG_BALANCE, 2**255),  # a legitimate huge balance still reads
        (LONG_ANSWER, 7),  # 4 KiB answered: only its first 32 bytes are read
    ],
)
async def test_hostile_balance_of_reads_as_unreadable_for_its_accounts_only(
    evm: EvmClient, factory: str, mode: int, expected: int | None
) -> None:
    token = await hostile_token(evm, mode)
    accounts = fresh_accounts(3)

    data = encode_balances_of(token, accounts)
    balances = decode_balances_of(await evm.eth_call(factory, data))
    gas = await evm.estimate_gas(DEV_ADDRESSES[0], factory, data)

    assert balances == [expected] * 3
    # Each read costs at most its stipend (plus the call), never the whole call's gas.
    assert gas < 3 * 30_000 + 60_000


async def test_a_looping_token_does_not_stop_reads_of_another_token(
    evm: EvmClient, dev: DevDeployment
) -> None:
    looping = await hostile_token(evm, LOOPS)
    escrows = fresh_accounts(6)
    await send(evm, PAYER_KEY, dev.token, encode_call(TEST_TOKEN, "transfer", escrows[2], 55))

    hostile = await read(evm, dev.factory, looping, escrows)
    tusd = await read(evm, dev.factory, dev.token, escrows)
    native = await read(evm, dev.factory, ZERO_ADDRESS, [escrows[0], DEV_ADDRESSES[9]])

    assert hostile == [None] * 6
    assert tusd == [0, 0, 55, 0, 0, 0]
    assert native == [0, await evm.get_balance(DEV_ADDRESSES[9])]


async def test_a_token_without_code_reads_as_unreadable(evm: EvmClient, factory: str) -> None:
    not_a_token = Account.create().address

    assert await read(evm, factory, not_a_token, list(DEV_ADDRESSES[:3])) == [None] * 3


async def test_balances_of_answers_short_when_gas_runs_low_and_the_gateway_reads_the_rest(
    evm: EvmClient, dev: DevDeployment
) -> None:
    looping = await hostile_token(evm, LOOPS)
    accounts = fresh_accounts(40)  # 40 x 30k = 1.2M gas, more than the call below gets

    low_gas = CappedEvm(evm.rpc, cap=400_000)
    short = decode_balances_of(
        await low_gas.eth_call(dev.factory, encode_balances_of(looping, accounts))
    )
    config = ChainConfig(
        chain_id=dev.chain_id, name="anvil", rpc_url="http://unused", factory=dev.factory
    )
    gateway = EvmGateway(config, low_gas, b"")
    low_gas.calls = 0
    full = await gateway.balances(looping, [*accounts, accounts[0]])

    assert 0 < len(short) < 40 and short == [None] * len(short)
    assert full == [None] * 41
    assert low_gas.calls == -(-41 // len(short))  # the rest read in further calls


# --- native coin refused during a token sweep --------------------------------------------


def new_salt() -> bytes:
    return os.urandom(32)


async def fund(evm: EvmClient, token: str, escrow: str, tokens: int, native: int) -> None:
    await send(evm, PAYER_KEY, token, encode_call(TEST_TOKEN, "transfer", escrow, tokens))
    await send(evm, PAYER_KEY, escrow, b"", value=native)


async def set_accepting(evm: EvmClient, wallet: str, accepting: bool) -> None:
    await send(evm, PAYER_KEY, wallet, encode_call("EthRejecter", "setAccepting", accepting))


async def test_owner_refusing_native_dust_still_gets_the_token_sweep(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = await deploy_test_contract(evm, "EthRejecter")
    salts = [new_salt(), new_salt()]
    escrows = [escrow_address(dev.factory, owner, s) for s in salts]
    await fund(evm, dev.token, escrows[0], 1_000, 3)
    await fund(evm, dev.token, escrows[1], 2_000, 4)
    factory_native = await evm.get_balance(dev.factory)

    receipt = await send(evm, CALLER_KEY, dev.factory, encode_withdraw(owner, dev.token, salts))

    assert factory_events(receipt, "Withdrawn") == [
        (owner, dev.token, 2, 3_000, 0),
        (owner, ZERO_ADDRESS, 2, 7, 0),
    ]
    assert factory_events(receipt, "NativeCredited") == [(owner, 7)]
    assert await token_balance(evm, dev.token, owner) == 3_000
    assert [await token_balance(evm, dev.token, e) for e in escrows] == [0, 0]
    assert await evm.get_balance(owner) == 0
    assert await native_credit(evm, dev.factory, owner) == 7
    assert await evm.get_balance(dev.factory) == factory_native + 7  # kept, not burnt

    # While the owner still refuses, a claim reverts and keeps the credit.
    reason = await expect_revert(
        evm, CALLER_KEY, dev.factory, encode_call(PAYMENT_FACTORY, "claimNativeCredit", owner)
    )
    assert reason == RevertReason("NativeTransferFailed", (owner.lower(),))
    assert await native_credit(evm, dev.factory, owner) == 7

    # Once it accepts, the owner's next native sweep pays the credit too.
    await set_accepting(evm, owner, True)
    later = new_salt()
    await send(evm, PAYER_KEY, escrow_address(dev.factory, owner, later), b"", value=10)
    receipt = await send(
        evm, CALLER_KEY, dev.factory, encode_withdraw(owner, ZERO_ADDRESS, [later])
    )

    assert factory_events(receipt, "Withdrawn") == [(owner, ZERO_ADDRESS, 1, 10, 0)]
    assert factory_events(receipt, "NativeCreditPaid") == [(owner, 7)]
    assert await evm.get_balance(owner) == 17
    assert await native_credit(evm, dev.factory, owner) == 0
    assert await evm.get_balance(dev.factory) == factory_native


async def test_payout_refusing_its_native_fee_is_credited_and_claimed_later(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = Account.create()
    payout = await deploy_test_contract(evm, "EthRejecter")
    await set_fee_and_payout(evm, dev.factory, owner, 500, payout)
    salt = new_salt()
    await fund(evm, dev.token, escrow_address(dev.factory, owner.address, salt), 10_000, 1_000)

    receipt = await send(
        evm, CALLER_KEY, dev.factory, encode_withdraw(owner.address, dev.token, [salt])
    )

    assert factory_events(receipt, "Withdrawn") == [
        (owner.address, dev.token, 1, 10_000, 500),
        (owner.address, ZERO_ADDRESS, 1, 1_000, 50),
    ]
    assert factory_events(receipt, "NativeCredited") == [(payout, 50)]
    assert await token_balance(evm, dev.token, payout) == 500
    assert await evm.get_balance(owner.address) == 950
    assert await native_credit(evm, dev.factory, payout) == 50

    await set_accepting(evm, payout, True)
    claim = encode_call(PAYMENT_FACTORY, "claimNativeCredit", payout)
    receipt = await send(evm, CALLER_KEY, dev.factory, claim)  # anyone may claim for it

    assert factory_events(receipt, "NativeCreditPaid") == [(payout, 50)]
    assert await evm.get_balance(payout) == 50
    assert await native_credit(evm, dev.factory, payout) == 0


async def test_a_native_sweep_to_an_owner_refusing_coin_credits_it_until_a_sweep_it_accepts(
    evm: EvmClient, dev: DevDeployment
) -> None:
    owner = await deploy_test_contract(evm, "EthRejecter")
    salts = [new_salt(), new_salt()]
    escrows = [escrow_address(dev.factory, owner, salt) for salt in salts]
    await send(evm, PAYER_KEY, escrows[0], b"", value=99)
    factory_native = await evm.get_balance(dev.factory)

    receipt = await send(
        evm, CALLER_KEY, dev.factory, encode_withdraw(owner, ZERO_ADDRESS, salts[:1])
    )

    assert factory_events(receipt, "Withdrawn") == [(owner, ZERO_ADDRESS, 1, 99, 0)]
    assert factory_events(receipt, "NativeCredited") == [(owner, 99)]
    assert await evm.get_balance(escrows[0]) == 0
    assert await native_credit(evm, dev.factory, owner) == 99
    assert await evm.get_balance(dev.factory) == factory_native + 99

    # Refused again: the new share joins the credit. Accepted: both arrive in one send.
    await send(evm, PAYER_KEY, escrows[1], b"", value=1)
    await send(evm, CALLER_KEY, dev.factory, encode_withdraw(owner, ZERO_ADDRESS, salts[1:]))
    assert await native_credit(evm, dev.factory, owner) == 100
    await set_accepting(evm, owner, True)
    await send(evm, PAYER_KEY, escrows[0], b"", value=5)
    receipt = await send(
        evm, CALLER_KEY, dev.factory, encode_withdraw(owner, ZERO_ADDRESS, salts[:1])
    )

    assert factory_events(receipt, "NativeCreditPaid") == [(owner, 100)]
    assert await evm.get_balance(owner) == 105
    assert await native_credit(evm, dev.factory, owner) == 0
    assert await evm.get_balance(dev.factory) == factory_native


async def test_gateway_refuses_a_read_that_makes_no_progress(
    evm: EvmClient, dev: DevDeployment
) -> None:
    config = ChainConfig(
        chain_id=dev.chain_id, name="anvil", rpc_url="http://unused", factory=dev.factory
    )
    starved = EvmGateway(config, CappedEvm(evm.rpc, cap=60_000), b"")  # below one read

    with pytest.raises(ChainUnavailable, match="answered 0 values for 2 addresses"):
        await starved.balances(dev.token, fresh_accounts(2))
