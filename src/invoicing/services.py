"""The running service's parts, built once from Settings and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field

from invoicing.chain.chains import ChainRegistry
from invoicing.chain.escrows import escrow_init_code_hash
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import ChainGateway, EvmGateway
from invoicing.clock import Clock, SystemClock
from invoicing.db import Database
from invoicing.settings import Settings


@dataclass
class Services:
    settings: Settings
    db: Database
    chains: ChainRegistry
    clock: Clock = field(default_factory=SystemClock)

    async def aclose(self) -> None:
        await self.chains.aclose()
        await self.db.dispose()


def build_services(settings: Settings, clock: Clock | None = None) -> Services:
    """Connect the database and every configured chain (no network traffic yet)."""
    init_hash = escrow_init_code_hash()
    policy = settings.rpc_policy()
    gateways: dict[int, ChainGateway] = {
        chain_id: EvmGateway(
            config,
            EvmClient.connect(
                config.rpc_urls,
                policy=policy,
                eip1559=config.eip1559,
                chain_id=chain_id,
                confirmations=config.confirmations,
            ),
            init_hash,
        )
        for chain_id, config in settings.chain_configs().items()
    }
    return Services(
        settings=settings,
        db=Database(settings.database_url),
        chains=ChainRegistry(gateways),
        clock=clock or SystemClock(),
    )
