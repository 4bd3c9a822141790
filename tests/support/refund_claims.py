"""Refund claim links in tests: make one from the dashboard, post an address as the payer's
browser does, read the claim's row."""

from __future__ import annotations

import re

import httpx

from invoicing.services import Services
from invoicing.tables.refunds import RefundClaim


async def make_link(http: httpx.AsyncClient, csrf: str, invoice_id: str) -> tuple[str, str]:
    """(the page made, the token of the link it shows once)."""
    answer = await http.post(f"/dashboard/invoices/{invoice_id}/refund-claim", data={"csrf": csrf})
    assert answer.status_code == 200, answer.text
    found = re.search(
        r'id="claim-url" readonly size="60" value="[^"]*/refund-claim/([^"]+)"', answer.text
    )
    assert found, "the page shows no claim link"
    return answer.text, found.group(1)


async def claim(http: httpx.AsyncClient, token: str, address: str) -> httpx.Response:
    return await http.post(f"/refund-claim/{token}", data={"address": address})


async def claim_row(services: Services, invoice_id: str) -> RefundClaim | None:
    async with services.db.sessions() as session:
        return await session.get(RefundClaim, invoice_id)
