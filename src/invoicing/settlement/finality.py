"""What a relayer transaction means once it is final, by its purpose.

``tracking.finalize`` marks a transaction confirmed, failed (reverted) or dropped, then hands
it to the handler its purpose registered here, in the same database transaction. The module
that sends a purpose's transactions registers its handler when it is imported: withdrawals
in ``settlement.withdrawals``, refunds in ``refunds.service``; the owner's settings (SetFee,
SetPayout) need none, the factory holds them. ``workers`` imports every such module, so a
process that only follows transactions knows them all.

A handler may first read the chain at the receipt's block (``read``, for a confirmed
transaction only): that runs before the database transaction, which holds no lock while a
node answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.gateway import ChainGateway
from invoicing.services import Services
from invoicing.tables.settlement import RelayerTransaction

R = TypeVar("R")


@dataclass(frozen=True)
class Final(Generic[R]):
    """A transaction that just became final, as its purpose's handler sees it."""

    row: RelayerTransaction  # its status set: confirmed, failed or dropped
    receipt: dict[str, Any] | None  # None: dropped (its nonce went to another transaction)
    factory: str
    now_ms: int
    readings: R | None = None  # what the handler's ``read`` found (confirmed only)


@dataclass(frozen=True)
class OnFinal(Generic[R]):
    """A purpose's handler: ``settle`` applies the outcome inside the database transaction
    that marks the row final; ``read`` gathers what it needs from the chain beforehand."""

    settle: Callable[[AsyncSession, Services, Final[R]], Awaitable[None]]
    read: Callable[[Services, ChainGateway, RelayerTransaction, int], Awaitable[R]] | None = None


_HANDLERS: dict[str, OnFinal[Any]] = {}


def on_final(purpose: str, handler: OnFinal[Any]) -> None:
    """Register what a final transaction of ``purpose`` (a ``TxPurpose``) means."""
    _HANDLERS[purpose] = handler


def handler_of(purpose: str) -> OnFinal[Any] | None:
    """The handler ``purpose`` registered; None: nothing to apply once final."""
    return _HANDLERS.get(purpose)
