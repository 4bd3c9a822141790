"""The monitor after an outage of the chain's node: its wait between failed reads stops
growing at ``MAX_CHAIN_BACKOFF_S``, so a payment made during a long outage is seen within
a couple of seconds of the node's return (grown to 30 s, it waited up to the whole backoff)."""

from __future__ import annotations

import asyncio
import time

from invoicing.chain.fake import FakeChain
from invoicing.monitor import worker as monitor
from tests.support.monitoring import fake_services, new_invoice, reload


async def test_a_payment_made_during_a_chain_outage_is_seen_soon_after_it_ends(
    own_database: str, fake: FakeChain
) -> None:
    services = fake_services(own_database, fake, monitor_poll_interval_s=0.5)
    invoice = await new_invoice(services, fake, webhook_url=None)
    stop = asyncio.Event()
    fake.available = False
    task = asyncio.create_task(monitor.run(services, stop))
    fake.pay(invoice.payment_address, 10**18)
    # Failed reads at about 0, 1, 3 and 5 s now (7 and 15 s with the backoff doubling on).
    await asyncio.sleep(4.0)
    assert (await reload(services, invoice)).status == "pending"
    fake.available = True
    restored = time.monotonic()
    while (await reload(services, invoice)).status != "paid":
        assert time.monotonic() - restored < 2.5, "the monitor slept through the node's return"
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    await services.db.dispose()
