"""What a payment method supplies (docs/architecture.md#payment-methods): its name, what a
final relayer transaction of each of its purposes means, and, when it has one, a worker loop.
Its routes are web-layer modules in its folder (``routes.py``, ``*_routes.py``), listed in
``web.app``; what the payment page offers is read through ``page_offer``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from invoicing.services import Services
from invoicing.settlement.finality import OnFinal

WorkerLoop = Callable[[Services, Any], Awaitable[None]]  # (services, stop: asyncio.Event)
PageOffer = Callable[[Services, str], Awaitable[Any]]  # (services, paymentAddress) → offer


@dataclass(frozen=True)
class PaymentMethod:
    """One way to pay."""

    name: str
    # What a final transaction of each of its relay purposes (a ``TxPurpose``) means.
    finality: Mapping[str, OnFinal[Any]] = field(default_factory=dict)
    # What the payment page offers for the invoice at an address (None: nothing).
    page_offer: PageOffer | None = None
    worker: WorkerLoop | None = None
