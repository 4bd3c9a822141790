"""An owner's choice, per chain, to let payers pay its invoices without gas: off until the
owner turns it on (``GET``/``POST /integration/gasless``). The relayer pays each such payment's
gas from the owner's share of its daily budget (docs/security.md#the-relayers-gas)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from invoicing.db import Database, upsert
from invoicing.services import Services
from invoicing.tables.relay import GaslessOptIn


@dataclass(frozen=True)
class GaslessChoice:
    """Whether the owner's invoices on the chain can be paid without gas, and which of the
    chain's tokens support it (EIP-3009)."""

    chain_id: int
    enabled: bool
    tokens: tuple[str, ...]  # checksummed addresses


async def is_enabled(db: Database, owner_address: str, chain_id: int) -> bool:
    async with db.sessions() as session:
        enabled = await session.scalar(
            select(GaslessOptIn.enabled).where(
                GaslessOptIn.owner_key == owner_address.lower(),
                GaslessOptIn.chain_id == chain_id,
            )
        )
    return bool(enabled)


async def gasless_choice(services: Services, owner_address: str, chain_id: int) -> GaslessChoice:
    """The owner's choice on a configured chain (UnsupportedChain otherwise)."""
    chain = services.chains.get(chain_id)
    tokens = tuple(t.address for t in chain.config.tokens if t.eip3009 is not None)
    enabled = await is_enabled(services.db, owner_address, chain_id)
    return GaslessChoice(chain_id, enabled, tokens)


async def set_gasless(
    services: Services, owner_address: str, chain_id: int, enabled: bool
) -> GaslessChoice:
    """Turn gasless payments on or off for the owner's invoices on the chain."""
    services.chains.get(chain_id)  # a configured chain
    db = services.db
    now_ms = services.clock.now_ms()
    async with db.transaction() as session:
        await session.execute(
            upsert(db.dialect, GaslessOptIn)
            .values(
                owner_key=owner_address.lower(),
                chain_id=chain_id,
                enabled=enabled,
                updated_at=now_ms,
            )
            .on_conflict_do_update(
                index_elements=["owner_key", "chain_id"],
                set_={"enabled": enabled, "updated_at": now_ms},
            )
        )
    return await gasless_choice(services, owner_address, chain_id)
