"""Services over several RPC endpoints with short timeouts, and one block pass of the monitor
over them."""

from __future__ import annotations

from typing import Any

from invoicing.chain.rpc import RpcPolicy
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import run_block_pass
from invoicing.services import Services
from tests.conftest import MakeServices
from tests.support.withdrawals import gateway

# Short timeouts and backoffs so the faults cost little time.
FAST_RPC: dict[str, Any] = {
    "rpc_timeout_s": 0.5,
    "rpc_backoff_s": 0.01,
    "rpc_backoff_max_s": 0.05,
    "rpc_retry_after_max_s": 5.0,
    "rpc_failures_before_cooldown": 3,
    "rpc_cooldown_s": 60.0,
}


FAST_POLICY = RpcPolicy(
    timeout_s=0.5, max_attempts=4, backoff_s=0.01, backoff_max_s=0.05, cooldown_s=60.0
)


async def services_over(make_services: MakeServices, *urls: str, **settings: Any) -> Services:
    return await make_services(
        chain={"rpc_url": urls[0], "rpc_urls": urls},
        page_recheck_interval_s=0,
        **(FAST_RPC | settings),
    )


async def detect(services: Services) -> None:
    chain = gateway(services)
    await run_block_pass(services, chain, await confirmed_block(chain))


# A URL stuck behind the other leaves the quorum once its head block is this old (anvil makes
# blocks only for transactions, so the head block of an honest URL may be old too: the tests
# of a URL stuck behind set this, those of a URL running ahead keep the default).
STUCK_S = {"rpc_head_stale_s": 0.01}
