"""The status lookup's live re-check: concurrent calls share one chain read (FakeChain, real DB)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Sequence

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from tests.support.monitoring import (
    TOKEN,
    clock_of,
    events_of,
    fake_services,
    new_invoice,
    reload,
)

ETH = 10**18


class HeldChain(FakeChain):
    """A FakeChain that counts head reads and can hold a balance read after taking its values
    (a read in flight); ``reads`` lists the addresses of every balance read, ``read_at`` the
    block of each."""

    def __init__(self, confirmations: int = 1) -> None:
        super().__init__(chain_id=random.randrange(10**6, 10**9), confirmations=confirmations)
        self.add_token(TOKEN, 6, "TUSD")
        self.block = 10
        self.head_reads = 0
        self.reads: list[list[str]] = []
        self.read_at: list[int] = []
        self.release = asyncio.Event()
        self.release.set()
        self.reading = asyncio.Event()

    async def block_number(self) -> int:
        self.head_reads += 1
        return await super().block_number()

    async def read_escrows(
        self, groups: Sequence[tuple[str | None, Sequence[str]]], block: int
    ) -> list[list[int | None]]:
        values = await super().read_escrows(groups, block)
        self.read_at.append(block)
        self.reads.append([address for _, addresses in groups for address in addresses])
        self.reading.set()
        await self.release.wait()
        return values


@pytest.fixture
def fake() -> HeldChain:
    return HeldChain()


# Where one confirmation suffices the head is read with the balances, in one call; deeper,
# the head is read first and the balances at the confirmed block below it.
DEPTHS = [(1, 0), (3, 1)]  # (confirmations, head reads per balance read)


@pytest.fixture(params=DEPTHS, ids=["one-confirmation", "three-confirmations"])
def depth(request: pytest.FixtureRequest, fake: HeldChain) -> tuple[int, int]:
    confirmations, head_reads = request.param
    fake.config = dataclasses.replace(fake.config, confirmations=confirmations)
    return confirmations, head_reads


@pytest.fixture
async def services(database_url: str, fake: HeldChain) -> AsyncIterator[Services]:
    built = fake_services(database_url, fake)
    yield built
    await built.db.dispose()


async def test_concurrent_rechecks_share_one_read(
    services: Services, fake: HeldChain, depth: tuple[int, int]
) -> None:
    confirmations, head_reads = depth
    native = [await new_invoice(services, fake, amount="1") for _ in range(3)]
    tokens = [await new_invoice(services, fake, amount="2", token=TOKEN) for _ in range(3)]
    fake.pay(native[0].payment_address, ETH)
    fake.pay(native[1].payment_address, ETH // 4)
    fake.pay(tokens[0].payment_address, 2_500_000, TOKEN)
    fake.pay(tokens[1].payment_address, 1_000_000, TOKEN)
    fake.block += confirmations - 1  # the payments' block is confirmed
    asked = [*native, *tokens, await reload(services, native[0])]  # the first one twice

    answers = await asyncio.gather(*(recheck_invoice(services, i) for i in asked))

    assert fake.head_reads == head_reads
    # One read for both tokens (the EscrowReader), each escrow once, at the confirmed block.
    assert [len(addresses) for addresses in fake.reads] == [6]
    assert fake.read_at == [10]
    assert [(a.status, a.balance_raw) for a in answers] == [
        ("paid", str(ETH)),
        ("pending", str(ETH // 4)),
        ("pending", "0"),
        ("paid", "2500000"),
        ("pending", "1000000"),
        ("pending", "0"),
        ("paid", str(ETH)),
    ]
    assert [len(await events_of(services, i)) for i in [*native, *tokens]] == [1, 0, 0, 1, 0, 0]
    stored = await reload(services, native[1])
    assert (stored.status, stored.balance_raw) == ("pending", str(ETH // 4))


async def test_a_recheck_arriving_during_a_read_waits_for_the_next_read(
    services: Services, fake: HeldChain, depth: tuple[int, int]
) -> None:
    confirmations, head_reads = depth
    invoice = await new_invoice(services, fake)
    fake.release.clear()
    early = asyncio.create_task(recheck_invoice(services, invoice))
    await fake.reading.wait()  # the early read has taken its values and is in flight

    fake.pay(invoice.payment_address, ETH)
    fake.block += confirmations - 1
    late = asyncio.create_task(recheck_invoice(services, await reload(services, invoice)))
    for _ in range(5):
        await asyncio.sleep(0)
    assert (fake.head_reads, len(fake.reads)) == (head_reads, 1) and not late.done()
    fake.release.set()

    first, second = await early, await late
    assert (first.status, first.balance_raw) == ("pending", "0")
    assert (second.status, second.balance_raw) == ("paid", str(ETH))
    assert (fake.head_reads, len(fake.reads)) == (2 * head_reads, 2)
    assert len(await events_of(services, invoice)) == 1


async def test_a_reading_that_changes_nothing_is_not_written(
    services: Services, fake: HeldChain
) -> None:
    invoice = await new_invoice(services, fake)
    created_at = invoice.last_checked_at
    clock_of(services).advance(5_000)

    answer = await recheck_invoice(services, invoice)

    stored = await reload(services, invoice)
    assert (answer.status, answer.last_checked_at) == ("pending", services.clock.now_ms())
    assert (stored.last_checked_at, stored.updated_at) == (created_at, created_at)
    assert invoice.last_checked_at == created_at  # the argument is left as it was


async def test_expiry_seen_by_a_recheck_is_stored(services: Services, fake: HeldChain) -> None:
    invoice = await new_invoice(services, fake, expires_in_ms=1_000)
    clock_of(services).advance(1_000)

    answer = await recheck_invoice(services, invoice)

    stored = await reload(services, invoice)
    assert answer.status == stored.status == "expired"
    assert stored.last_checked_at == services.clock.now_ms()


async def test_an_unreachable_chain_fails_every_recheck_of_the_batch(
    services: Services, fake: HeldChain
) -> None:
    invoices = [await new_invoice(services, fake) for _ in range(3)]
    fake.pay(invoices[0].payment_address, ETH)
    fake.available = False

    outcomes = await asyncio.gather(
        *(recheck_invoice(services, i) for i in invoices), return_exceptions=True
    )

    assert all(isinstance(outcome, ChainUnavailable) for outcome in outcomes)
    assert (await reload(services, invoices[0])).status == "pending"
    fake.available = True
    assert (await recheck_invoice(services, invoices[0])).status == "paid"
