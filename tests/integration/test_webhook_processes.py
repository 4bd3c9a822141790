"""Webhook delivery across real worker processes (`invoicing worker`): crash and scale-out."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.notifications import WebhookAttempt
from tests.conftest import MakeServices
from tests.support.monitor_anvil import eventually, open_invoice, pay_native
from tests.support.monitoring import events_of
from tests.support.receiver import Receiver
from tests.support.signing import new_owner

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER = [str(Path(sys.executable).with_name("invoicing")), "worker"]
# A worker's start-up (imports, start-up checks) takes 2 s on a quiet machine and over 30 s
# on a loaded 2-core CI machine; a wait that includes one allows this much.
STARTED_S = 120


@pytest.fixture
def worker_env(
    own_database: str, anvil: AnvilProcess, dev: DevDeployment
) -> Iterator[dict[str, str]]:
    # A database of its own: the session's holds other tests' secrets, sealed under other
    # INVOICING_SECRET values, and a worker refuses to start on those.
    with tempfile.TemporaryDirectory() as tmp:
        chains = Path(tmp) / "chains.toml"
        chains.write_text(
            "[[chain]]\n"
            f"chain_id = {dev.chain_id}\n"
            f'rpc_url = "{anvil.url}"\n'
            f'factory = "{dev.factory}"\n'
            "confirmations = 1\n"
        )
        yield {
            **os.environ,
            "INVOICING_DATABASE_URL": own_database,
            "INVOICING_CHAINS_FILE": str(chains),
            "INVOICING_ENVIRONMENT": "development",
            "INVOICING_WEBHOOK_ALLOW_PRIVATE": "true",
            "INVOICING_WEBHOOK_RETRY_DELAY_S": "1.5",
            "INVOICING_WEBHOOK_POLL_INTERVAL_S": "0.05",
            "INVOICING_MONITOR_INTERVAL_S": "1",
            "INVOICING_MONITOR_POLL_INTERVAL_S": "0.1",
            "INVOICING_WITHDRAWAL_INTERVAL_S": "3600",
        }


class WorkerProcess:
    def __init__(self, env: dict[str, str]) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="worker-", suffix=".log")
        self.process = subprocess.Popen(
            WORKER, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, in-flight state is lost."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()

    def tail(self) -> str:
        return "\n".join(Path(self.log.name).read_text(errors="replace").splitlines()[-30:])


async def recorded_attempts(services: object, event_id: str) -> list[int]:
    async with services.db.sessions() as session:  # type: ignore[attr-defined]
        rows = await session.scalars(
            select(WebhookAttempt.attempt).where(WebhookAttempt.event_id == event_id)
        )
        return sorted(rows)


async def test_a_worker_killed_between_attempts_still_delivers_after_restart(
    make_services: MakeServices,
    evm: EvmClient,
    hooks: Receiver,
    worker_env: dict[str, str],
    own_database: str,
) -> None:
    services = await make_services(database_url=own_database)
    invoice = await open_invoice(services, new_owner(), "0.03", hooks.url("crash"))
    hooks.answers["/crash"] = [500]
    first = WorkerProcess(worker_env)
    try:
        await pay_native(evm, invoice.payment_address, 3 * 10**16)
        (attempt_1,) = await hooks.wait_for("crash", 1, timeout_s=STARTED_S)
        event_id = attempt_1.headers["x-service-event-id"]

        async def attempt_1_recorded() -> bool:
            return await recorded_attempts(services, event_id) == [1]

        await eventually(attempt_1_recorded, what="attempt 1 recorded")
        first.kill()
        await asyncio.sleep(2.5)  # past the retry delay: nobody is left to retry
        assert len(hooks.at("crash")) == 1
    finally:
        log_1 = first.tail()
        first.stop()

    second = WorkerProcess(worker_env)
    try:
        requests = await hooks.wait_for("crash", 2, timeout_s=STARTED_S)
    except AssertionError:
        raise AssertionError(f"no retry after restart\n{log_1}\n---\n{second.tail()}") from None
    finally:
        await asyncio.sleep(0.3)
        second.stop()

    (event,) = await events_of(services, invoice)
    assert [r.headers["x-service-event-id"] for r in requests] == [event.id, event.id]
    assert [r.headers["x-service-delivery-attempt"] for r in requests] == ["1", "2"]
    assert requests[0].body == requests[1].body
    assert (event.status, event.attempts) == ("delivered", 2)
    assert await recorded_attempts(services, event.id) == [1, 2]


async def test_two_worker_processes_never_send_the_same_attempt_twice(
    make_services: MakeServices,
    evm: EvmClient,
    hooks: Receiver,
    worker_env: dict[str, str],
    own_database: str,
) -> None:
    services = await make_services(database_url=own_database)
    owner = new_owner()
    invoices = [
        await open_invoice(services, owner, "0.001", hooks.url(f"pair/{i}")) for i in range(24)
    ]
    for i in range(24):
        hooks.answers[f"/pair/{i}"] = [503]  # every event needs a second attempt
        hooks.delay_s[f"/pair/{i}"] = 0.1
    workers = [WorkerProcess(worker_env), WorkerProcess(worker_env)]
    try:
        for invoice in invoices:
            await pay_native(evm, invoice.payment_address, 10**15)
        for i in range(24):
            await hooks.wait_for(f"pair/{i}", 2, timeout_s=STARTED_S)
        await asyncio.sleep(2.0)  # room for any duplicate to show up
    finally:
        logs = [w.tail() for w in workers]
        for w in workers:
            w.stop()

    sent = Counter(
        (r.headers["x-service-event-id"], r.headers["x-service-delivery-attempt"])
        for r in hooks.requests
        if r.path.startswith("/pair/")
    )
    assert all(count == 1 for count in sent.values()), (sent, logs)
    assert len(sent) == 48
    for i, invoice in enumerate(invoices):
        (event,) = await events_of(services, invoice)
        assert (event.status, event.attempts) == ("delivered", 2)
        assert sorted(a for (e, a) in sent if e == event.id) == ["1", "2"]
        assert {r.headers["x-service-event-id"] for r in hooks.at(f"pair/{i}")} == {event.id}
