"""Every payment method the service offers, listed here and nowhere else (a method is not
registered by an import's side effect): ``register`` tells the relayer what their final
transactions mean, and ``worker_loops`` gives the worker loops they run."""

from __future__ import annotations

from invoicing.payments.eip3009.service import EIP3009
from invoicing.payments.method import PaymentMethod, WorkerLoop
from invoicing.payments.subscriptions.periods import SUBSCRIPTIONS
from invoicing.payments.x402.facilitator import X402
from invoicing.settlement.finality import on_final

METHODS: tuple[PaymentMethod, ...] = (EIP3009, X402, SUBSCRIPTIONS)


def register() -> None:
    """What a final transaction of each method's purposes means (``settlement.finality``).
    Two methods may not claim one purpose."""
    claimed: dict[str, str] = {}
    for method in METHODS:
        for purpose, handler in method.finality.items():
            if claimed.setdefault(purpose, method.name) != method.name:
                raise ValueError(f"{method.name} and {claimed[purpose]} both claim {purpose}")
            on_final(purpose, handler)


def worker_loops() -> list[WorkerLoop]:
    return [method.worker for method in METHODS if method.worker is not None]
