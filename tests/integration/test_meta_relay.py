"""Relayed meta-transactions on FakeChain and a real database: the gas cap, one pending
transaction per (chain, owner, nonce), the per-owner daily budget. Nothing is sent or
recorded when a request is refused."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import selector
from invoicing.chain.answers import ContractRevert
from invoicing.chain.chains import ChainRegistry
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.fake import FAKE_FACTORY, FakeChain
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.errors import InvalidOwnerSignature, NonceMismatch, RateLimited
from invoicing.fees.service import MetaRequest, submit_meta
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.budget import Limits
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.tables.settlement import MetaTransaction, RelayerTransaction, TxStatus

pytestmark = pytest.mark.integration

_chain_ids = itertools.count(8_000_000 + int.from_bytes(os.urandom(2), "big") * 100)
DAY_MS = 86_400_000
# 2027-03-02 10:00:00 UTC: 14 hours to the next UTC day.
NOW_MS = 1_803_981_600_000
PER_DAY = 3


@dataclass
class Relaying:
    services: Services
    chain: FakeChain
    clock: FakeClock
    relayer: Relayer


@pytest.fixture
async def relaying(database_url: str) -> AsyncIterator[Relaying]:
    chain = FakeChain(chain_id=next(_chain_ids), relayer_key="0x" + os.urandom(32).hex())
    clock = FakeClock(NOW_MS)
    db = Database(database_url)
    settings = Settings(
        environment="development",
        database_url=database_url,
        relayer_meta_per_owner_per_day=PER_DAY,
    )
    services = Services(settings, db, ChainRegistry({chain.config.chain_id: chain}), clock)
    yield Relaying(services, chain, clock, Relayer(chain, db, clock, Limits.of(services.settings)))
    await db.dispose()


def set_fee(
    chain: FakeChain, owner: LocalAccount, fee_bps: int, nonce: int, now_ms: int = NOW_MS
) -> MetaRequest:
    deadline = now_ms // 1000 + 600
    typed = set_fee_typed_data(
        chain.config.chain_id, FAKE_FACTORY, owner.address, fee_bps, nonce, deadline
    )
    signature = Account.sign_message(encode_typed_data(full_message=typed), owner.key).signature
    return MetaRequest(
        owner.address, chain.config.chain_id, nonce, deadline, "0x" + bytes(signature).hex(),
        fee_bps=fee_bps,
    )  # fmt: skip


async def recorded(services: Services, chain: FakeChain) -> list[tuple[str, str]]:
    """(tx hash, status) of every transaction recorded on the chain."""
    async with services.db.sessions() as session:
        rows = await session.execute(
            select(RelayerTransaction.tx_hash, RelayerTransaction.status)
            .where(RelayerTransaction.chain_id == chain.config.chain_id)
            .order_by(RelayerTransaction.nonce)
        )
        return [(h, s) for h, s in rows]


async def test_a_call_over_the_gas_cap_is_refused_and_nothing_is_recorded(
    relaying: Relaying,
) -> None:
    services, chain = relaying.services, relaying.chain
    owner = Account.create()
    chain.gas_estimate = 18_314_244  # what the gas-burning wallet's check costs

    with pytest.raises(InvalidOwnerSignature) as raised:
        await submit_meta(services, set_fee(chain, owner, 100, 0))

    assert raised.value.details == {"gasLimit": 250_000}
    assert chain.gas_caps == [250_000]
    assert chain.sent == []
    assert await recorded(services, chain) == []


async def test_a_call_under_the_cap_is_sent_with_a_gas_limit_within_it(
    relaying: Relaying,
) -> None:
    services, chain = relaying.services, relaying.chain
    chain.gas_estimate = 220_000

    answer = await submit_meta(services, set_fee(chain, Account.create(), 100, 0))

    ((tx_hash, _),) = await recorded(services, chain)
    assert answer.tx_hash == tx_hash
    async with services.db.sessions() as session:
        row = await session.scalar(
            select(RelayerTransaction).where(RelayerTransaction.tx_hash == tx_hash)
        )
    assert row is not None and row.gas == 250_000


async def test_a_repeat_gets_the_pending_transaction_and_another_request_gets_409(
    relaying: Relaying,
) -> None:
    services, chain = relaying.services, relaying.chain
    owner = Account.create()
    request = set_fee(chain, owner, 100, 0)

    first = await submit_meta(services, request)
    again = await submit_meta(services, request)
    same_in_ms = await submit_meta(services, replace(request, deadline=request.deadline * 1000))
    with pytest.raises(NonceMismatch) as other:
        await submit_meta(services, set_fee(chain, owner, 200, 0))

    assert again == same_in_ms == first
    assert other.value.details == {"expected": "1"}
    assert await recorded(services, chain) == [(first.tx_hash, TxStatus.PENDING)]
    assert len(chain.sent) == 1


async def test_a_repeat_racing_the_first_send_gets_its_transaction_not_a_409(
    relaying: Relaying,
) -> None:
    # Another process sends the identical request between this one's database check and its
    # gas estimate, which then reverts against the pending state (the nonce is used).
    services, chain = relaying.services, relaying.chain
    owner = Account.create()
    request = set_fee(chain, owner, 100, 0)
    nonce_used = ContractRevert(
        3,
        "execution reverted",
        selector("InvalidAccountNonce(address,uint256)")
        + encode(["address", "uint256"], [owner.address, 0]),
    )
    racing: dict[str, Any] = {}
    estimate = chain.estimate_gas

    async def estimate_after_the_other_send(*args: Any, **kwargs: Any) -> int:
        if racing:  # the other process's own estimate
            return await estimate(*args, **kwargs)
        racing["started"] = True
        racing["first"] = await submit_meta(services, request)
        raise nonce_used

    chain.estimate_gas = estimate_after_the_other_send  # type: ignore[method-assign]
    answer = await submit_meta(services, request)

    assert answer == racing["first"]
    assert await recorded(services, chain) == [(answer.tx_hash, TxStatus.PENDING)]
    assert len(chain.sent) == 1


async def test_a_repeat_after_mining_and_before_confirmation_still_gets_the_same_hash(
    relaying: Relaying,
) -> None:
    services, chain = relaying.services, relaying.chain
    owner = Account.create()
    request = set_fee(chain, owner, 100, 0)
    first = await submit_meta(services, request)
    chain.nonces[owner.address.lower()] = 1  # mined: the factory moved the owner's nonce on

    again = await submit_meta(services, request)
    with pytest.raises(NonceMismatch) as other:
        await submit_meta(services, set_fee(chain, owner, 200, 0))

    assert again == first
    assert other.value.details == {"expected": "1"}
    assert len(chain.sent) == 1


async def test_a_dropped_transaction_frees_its_nonce_for_a_new_request(
    relaying: Relaying,
) -> None:
    services, chain, relayer = relaying.services, relaying.chain, relaying.relayer
    owner = Account.create()
    lost = await submit_meta(services, set_fee(chain, owner, 100, 0))
    chain.mined_counts[relayer.address.lower()] = 1  # its relayer nonce went to another tx
    await track_pending(services, chain, relayer)

    retry = await submit_meta(services, set_fee(chain, owner, 200, 0))

    assert retry.tx_hash != lost.tx_hash
    assert await recorded(services, chain) == [
        (lost.tx_hash, TxStatus.DROPPED),
        (retry.tx_hash, TxStatus.PENDING),
    ]
    async with services.db.sessions() as session:
        holders = await session.scalar(
            select(func.count())
            .select_from(MetaTransaction)
            .where(MetaTransaction.owner_key == owner.address.lower(), MetaTransaction.holds_nonce)
        )
    assert holders == 1


async def test_an_owner_gets_a_budget_of_meta_transactions_per_utc_day(
    relaying: Relaying,
) -> None:
    services, chain, clock = relaying.services, relaying.chain, relaying.clock
    owner, other_owner = Account.create(), Account.create()
    for nonce in range(PER_DAY):
        await submit_meta(services, set_fee(chain, owner, 100 + nonce, nonce))
        chain.nonces[owner.address.lower()] = nonce + 1
    sent_before = list(chain.sent)

    clock.advance(3_600_000)  # 11:00 UTC
    with pytest.raises(RateLimited) as refused:
        await submit_meta(services, set_fee(chain, owner, 50, PER_DAY, clock.now_ms()))
    another_owner = await submit_meta(services, set_fee(chain, other_owner, 50, 0, clock.now_ms()))
    clock.set(NOW_MS - NOW_MS % DAY_MS + DAY_MS)  # 00:00 UTC, the next day
    next_day = await submit_meta(services, set_fee(chain, owner, 50, PER_DAY, clock.now_ms()))

    assert refused.value.retry_after_s == 13 * 3600
    assert refused.value.details == {"retryAfterS": 13 * 3600}
    assert chain.sent[: len(sent_before)] == sent_before
    assert len(chain.sent) == PER_DAY + 2  # another owner's, and the next day's
    assert (another_owner.nonce, next_day.nonce) == (0, PER_DAY)


async def test_a_repeat_costs_no_budget(relaying: Relaying) -> None:
    services, chain = relaying.services, relaying.chain
    owner = Account.create()
    request = set_fee(chain, owner, 100, 0)

    answers = [await submit_meta(services, request) for _ in range(PER_DAY + 2)]

    assert {a.tx_hash for a in answers} == {answers[0].tx_hash}
    assert len(chain.sent) == 1
