"""What the chaos scenarios do as an integrator (create, list, look up) and what they check
afterwards in the database (events delivered, escrows swept once)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
from sqlalchemy import func, select

from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import WebhookEvent
from invoicing.tables.settlement import (
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)
from tests.chaos.topology import Api, Topology


def ether(wei: int) -> str:
    """``wei`` (under 1 ETH) as the API's decimal string."""
    assert 0 < wei < 10**18
    return f"0.{wei:018d}".rstrip("0")


def invoice_body(
    topology: Topology, owner: str, invoice_id: str, wei: int, webhook_path: str
) -> dict[str, Any]:
    return {
        "ownerAddress": owner,
        "chainId": topology.dev.chain_id,
        "amount": ether(wei),
        "invoiceId": invoice_id,
        "webhookUrl": topology.hooks.url(webhook_path),
    }


async def create(api: Api, key: str, body: dict[str, Any]) -> httpx.Response:
    return await api.http.post(
        "/integration/invoices", json=body, headers={"x-service-api-key": key}
    )


async def list_page(
    api: Api, key: str, owner: str, page: int = 1, limit: int = 100, **filters: str
) -> httpx.Response:
    params = {"ownerAddress": owner, "page": str(page), "limit": str(limit), **filters}
    return await api.http.get(
        "/integration/invoices", params=params, headers={"x-service-api-key": key}
    )


async def list_all(api: Api, key: str, owner: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    page = 1
    while True:
        response = await list_page(api, key, owner, page)
        assert response.status_code == 200, response.text
        body = response.json()
        items += body["items"]
        if page * body["limit"] >= body["total"]:
            return items
        page += 1


async def count_with_status(api: Api, key: str, owner: str, status: str) -> int:
    response = await list_page(api, key, owner, limit=1, status=status)
    if response.status_code != 200:
        return -1
    return int(response.json()["total"])


async def status_lookup(api: Api, key: str, owner: str, payment_address: str) -> httpx.Response:
    return await api.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner, "paymentAddress": payment_address},
        headers={"x-service-api-key": key},
    )


async def events_by_status(topology: Topology, owner: str) -> Counter[str]:
    async with topology.db.sessions() as session:
        rows = await session.execute(
            select(WebhookEvent.status, func.count())
            .join(Invoice, Invoice.id == WebhookEvent.invoice_pk)
            .where(Invoice.owner_address == owner)
            .group_by(WebhookEvent.status)
        )
        return Counter({status: count for status, count in rows.all()})


async def invoices_by_status(topology: Topology, owner: str) -> Counter[str]:
    async with topology.db.sessions() as session:
        rows = await session.execute(
            select(Invoice.status, func.count())
            .where(Invoice.owner_address == owner)
            .group_by(Invoice.status)
        )
        return Counter({status: count for status, count in rows.all()})


async def progress(topology: Topology, owner: str) -> str:
    """Where the owner's invoices and events stand (for a timeout's message)."""
    invoices = await invoices_by_status(topology, owner)
    events = await events_by_status(topology, owner)
    now_ms = int(time.time() * 1000)
    async with topology.db.sessions() as session:
        rows = await session.execute(
            select(WebhookEvent.attempts, WebhookEvent.claimed_until, WebhookEvent.next_attempt_at)
            .join(Invoice, Invoice.id == WebhookEvent.invoice_pk)
            .where(Invoice.owner_address == owner, WebhookEvent.status != "delivered")
            .limit(10)
        )
        waiting = [(a, (c - now_ms) // 1000, (n - now_ms) // 1000) for a, c, n in rows.all()]
        pending = await session.execute(
            select(RelayerTransaction.nonce, RelayerTransaction.tx_hash, RelayerTransaction.sent_at)
            .where(RelayerTransaction.status == "pending")
            .order_by(RelayerTransaction.nonce)
        )
        relayer = [(n, h[:10], (s - now_ms) // 1000) for n, h, s in pending.all()]
    return (
        f"invoices {dict(invoices)}, events {dict(events)}, "
        f"(attempts, lease s, next s) of some waiting: {waiting}, "
        f"pending relayer txs (nonce, hash, sent s): {relayer}"
    )


async def sweeps_per_invoice(topology: Topology, owner: str) -> Counter[str]:
    """For each of the owner's invoices, how many completed withdrawals swept it."""
    async with topology.db.sessions() as session:
        rows = await session.scalars(
            select(WithdrawalItem.invoice_id)
            .join(Withdrawal, Withdrawal.id == WithdrawalItem.withdrawal_id)
            .where(
                Withdrawal.owner_address == owner,
                Withdrawal.status == WithdrawalStatus.COMPLETED,
            )
        )
        return Counter(rows.all())


def webhook_duplicates(topology: Topology, prefix: str) -> tuple[int, int]:
    """(requests received, (event id, attempt number) pairs received more than once) over
    the webhook paths under ``prefix``."""
    received = [r for r in topology.hooks.requests if r.path.startswith(f"/{prefix}/")]
    pairs = Counter(
        (r.headers["x-service-event-id"], r.headers["x-service-delivery-attempt"]) for r in received
    )
    return len(received), sum(1 for n in pairs.values() if n > 1)


def undelivered(topology: Topology, failures: dict[str, int]) -> list[str]:
    """The webhook paths that never got a 2xx: the receiver answers each path its scripted
    failures (``failures[path]`` of them), then 200."""
    return [p for p, n in failures.items() if len(topology.hooks.at(p)) <= n]
