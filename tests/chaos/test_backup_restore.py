"""Scenario: the database is lost and restored from a ``pg_dump`` taken while the service ran,
as docs/operations/production.md says. The restored service goes on with nothing lost and
nothing sent twice: what the dump holds as delivered and swept is not delivered or swept
again, and payments made while the service was down are detected, delivered once and swept
once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.chaos.checks import (
    count_with_status,
    create,
    events_by_status,
    invoice_body,
    list_all,
    progress,
    sweeps_per_invoice,
)
from tests.chaos.conftest import CHAOS, SUMMARY
from tests.chaos.topology import Topology, wait_healthy, wait_until
from tests.conftest import RecordProperty
from tests.support.signing import new_owner

pytestmark = CHAOS

INVOICES = 6  # paid before the dump; as many again paid while the service is down


def _libpq_url(topology: Topology) -> str:
    """The services' database URL in the form pg_dump and pg_restore take."""
    url = make_url(topology.env["INVOICING_DATABASE_URL"]).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


async def _run(*args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, f"{args[0]}: {err.decode()}{out.decode()}"


@pytest.mark.timeout(300)
async def test_a_restored_dump_goes_on_with_nothing_lost_or_sent_twice(
    topology: Topology, record_property: RecordProperty, tmp_path: Path
) -> None:
    owner = new_owner().address
    key = await topology.api_key(owner)
    before = await topology.evm.get_balance(owner)
    wei = [10**14 + 3 * 10**9 + i for i in range(2 * INVOICES)]
    created = [
        await create(
            topology.apis[i % 2], key, invoice_body(topology, owner, f"bk-{i}", w, f"bk/{i}")
        )
        for i, w in enumerate(wei)
    ]
    assert [r.status_code for r in created] == [201] * len(wei)
    addresses = [r.json()["paymentAddress"] for r in created]

    # Half is paid, delivered and swept; then the nightly dump, with the service running.
    await topology.pay(list(zip(addresses[:INVOICES], wei[:INVOICES], strict=True)))

    async def first_half_done() -> bool:
        done = await count_with_status(topology.apis[0], key, owner, "completed")
        return done == INVOICES and await events_by_status(topology, owner) == {
            "delivered": INVOICES
        }

    await wait_until(
        first_half_done,
        120,
        "the first half completed",
        topology,
        lambda: progress(topology, owner),
    )
    dump = tmp_path / "invoicing.dump"
    await _run("pg_dump", "--format=custom", f"--file={dump}", _libpq_url(topology))

    # The host is lost with its database; meanwhile the other half is paid.
    for process in topology.processes:
        process.stop()
    await topology.pay(list(zip(addresses[INVOICES:], wei[INVOICES:], strict=True)))
    await topology.db.dispose()
    await _run(
        "psql", "--quiet", "--set=ON_ERROR_STOP=1", _libpq_url(topology),
        "--command=DROP SCHEMA public CASCADE; CREATE SCHEMA public;",
    )  # fmt: skip
    restore_started = time.monotonic()
    await _run("pg_restore", "--no-owner", "--exit-on-error", f"--dbname={_libpq_url(topology)}",
               str(dump))  # fmt: skip
    for process in topology.processes:
        process.start()
    await asyncio.gather(*(wait_healthy(api) for api in topology.apis))

    async def all_done() -> bool:
        done = await count_with_status(topology.apis[1], key, owner, "completed")
        return done == 2 * INVOICES and await events_by_status(topology, owner) == {
            "delivered": 2 * INVOICES
        }

    await wait_until(
        all_done, 120, "every invoice completed", topology, lambda: progress(topology, owner)
    )
    settled_s = time.monotonic() - restore_started

    items = await list_all(topology.apis[0], key, owner)
    assert sorted(item["paymentAddress"] for item in items) == sorted(addresses)
    assert {item["status"] for item in items} == {"completed"}
    # Each paid webhook reached the receiver once: the dump's deliveries were not sent again.
    assert [len(topology.hooks.at(f"/bk/{i}")) for i in range(2 * INVOICES)] == [1] * (2 * INVOICES)
    sweeps = await sweeps_per_invoice(topology, owner)
    assert len(sweeps) == 2 * INVOICES and set(sweeps.values()) == {1}
    assert await topology.evm.get_balance(owner) - before == sum(wei)
    assert topology.exited() == []
    record_property(
        SUMMARY,
        f"chaos backup-restore: {INVOICES} invoices paid before a pg_dump, {INVOICES} while the "
        f"service was down; after pg_restore every one completed {settled_s:.1f} s later, "
        "each webhook received once, each escrow swept once, lost 0",
    )
