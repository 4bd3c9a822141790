"""Scenario 2: the chain's node cut off (every connection to it reset) for CHAOS_CHAIN_CUT_S
(20 s in CI; the issue's 60 s with CHAOS_CHAIN_CUT_S=60). Creates and lists keep working,
status lookups that need a live read answer 503 ``chain_unavailable`` (a settled invoice's
answers from the store), no process exits, and payments made during the cut are detected,
delivered and swept after it."""

from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest

from tests.chaos.checks import (
    count_with_status,
    create,
    invoice_body,
    list_page,
    progress,
    status_lookup,
    undelivered,
    webhook_duplicates,
)
from tests.chaos.conftest import CHAOS, SUMMARY
from tests.chaos.topology import Topology, count_statuses, wait_until
from tests.conftest import RecordProperty
from tests.support.signing import new_owner

pytestmark = CHAOS

CUT_S = float(os.environ.get("CHAOS_CHAIN_CUT_S", "20"))
PAID_DURING_CUT = 8
PROBE_EVERY_S = 2.0


@pytest.mark.timeout(120 + CUT_S)
async def test_a_chain_cut_keeps_the_api_up_and_loses_no_payment(
    topology: Topology, record_property: RecordProperty
) -> None:
    owner = new_owner().address
    key = await topology.api_key(owner)
    first, second = topology.apis
    settled = await create(first, key, invoice_body(topology, owner, "chain-0", 10**14, "chain/0"))
    waiting = [
        await create(
            topology.apis[i % 2],
            key,
            invoice_body(topology, owner, f"chain-{i}", 10**14 + i, f"chain/{i}"),
        )
        for i in range(1, PAID_DURING_CUT + 1)
    ]
    assert [r.status_code for r in [settled, *waiting]] == [201] * (PAID_DURING_CUT + 1)
    await topology.pay([(settled.json()["paymentAddress"], 10**14)])
    await wait_until(
        lambda: _completed(topology, key, owner, 1), 60, "the first invoice completed", topology
    )

    topology.chain_proxy.cut()
    cut_at = time.monotonic()
    await topology.pay([(r.json()["paymentAddress"], 10**14 + i) for i, r in enumerate(waiting, 1)])
    probes: dict[str, list[httpx.Response]] = {"create": [], "list": [], "live": [], "stored": []}
    round_ = 0
    while time.monotonic() - cut_at < CUT_S:
        round_ += 1
        for api in topology.apis:
            i = 100 + round_ * 2 + topology.apis.index(api)
            body = invoice_body(topology, owner, f"chain-{i}", 10**14 + i, f"chain/{i}")
            live, stored = await asyncio.gather(
                status_lookup(api, key, owner, waiting[0].json()["paymentAddress"]),
                status_lookup(api, key, owner, settled.json()["paymentAddress"]),
            )
            probes["create"].append(await create(api, key, body))
            probes["list"].append(await list_page(api, key, owner, limit=5))
            probes["live"].append(live)
            probes["stored"].append(stored)
        assert topology.exited() == [], topology.tails()
        await asyncio.sleep(PROBE_EVERY_S)
    topology.chain_proxy.restore()
    restored_at = time.monotonic()

    assert count_statuses(probes["create"]) == {(201, None): 2 * round_}
    assert count_statuses(probes["list"]) == {(200, None): 2 * round_}
    assert count_statuses(probes["live"]) == {(503, "chain_unavailable"): 2 * round_}
    assert count_statuses(probes["stored"]) == {(200, None): 2 * round_}
    assert {r.json()["invoice"]["status"] for r in probes["stored"]} == {"completed"}
    failures = {f"/chain/{i}": 0 for i in range(PAID_DURING_CUT + 1)}

    async def detected() -> bool:
        paid = await count_with_status(first, key, owner, "completed")
        return paid == PAID_DURING_CUT + 1 and not undelivered(topology, failures)

    recover_s = await wait_until(
        detected, 90, "payments made during the cut", topology, lambda: progress(topology, owner)
    )
    answer = await status_lookup(second, key, owner, waiting[-1].json()["paymentAddress"])
    assert answer.status_code == 200 and answer.json()["invoice"]["status"] == "completed"
    received, duplicates = webhook_duplicates(topology, "chain")
    assert duplicates == 0
    assert topology.exited() == []
    record_property(
        SUMMARY,
        f"chaos chain-cut: {CUT_S:.0f} s cut, {PAID_DURING_CUT} payments during it, "
        f"{len(probes['live'])} live lookups answered 503 chain_unavailable, "
        f"{len(probes['create'])} creates and {len(probes['list'])} lists answered, "
        f"{PAID_DURING_CUT + 1} events delivered ({received} requests), lost 0, duplicates 0, "
        f"{recover_s:.1f} s from restore to every payment completed "
        f"({time.monotonic() - restored_at:.1f} s)",
    )


async def _completed(topology: Topology, key: str, owner: str, count: int) -> bool:
    return await count_with_status(topology.apis[0], key, owner, "completed") == count
