"""The owner's account: settings, the team (docs/integration/members.md) and the payments
report (docs/integration/reports.md) (written for asyncio; the blocking ones are generated,
see ``_async_client.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

from invoicing_client import _calls as calls
from invoicing_client._async_resources import AsyncSend
from invoicing_client.models import (
    Brand,
    MailSettings,
    Member,
    OwnerSettings,
    PaymentReport,
    RemovedMember,
)


class AsyncSettings:
    """The owner's settings, the payment page's brand, and which events are mailed."""

    def __init__(self, send: AsyncSend) -> None:
        self._send = send

    async def get(self) -> OwnerSettings:
        return await self._send(calls.call("settings.get"), calls.model(OwnerSettings))

    async def update(
        self,
        *,
        webhook_api_key_header: bool | None = None,
        underpayment_tolerance_bps: int | None = None,
    ) -> OwnerSettings:
        """Change what is given: ``webhook_api_key_header``, whether paid webhooks carry the
        owner's API key; ``underpayment_tolerance_bps`` (0 to 500), how far short of the
        amount due a payment may fall and still pay invoices created from now on."""
        body = calls.given(
            webhookApiKeyHeader=webhook_api_key_header,
            underpaymentToleranceBps=underpayment_tolerance_bps,
        )
        call = calls.call("settings.update", body=body)
        return await self._send(call, calls.model(OwnerSettings))

    async def brand(self) -> Brand:
        """What the payment page shows of the owner: display name, accent colour, logo."""
        return await self._send(calls.call("settings.brand"), calls.model(Brand))

    async def update_brand(
        self,
        *,
        display_name: str | None = None,
        accent_color: str | None = None,
        logo: bytes | None = None,
        remove: Sequence[str] = (),
    ) -> Brand:
        """Change what is given: ``display_name`` (1 to 64 characters), ``accent_color``
        (``"#rrggbb"``), ``logo`` (the bytes of a PNG, JPEG or WebP file of at most 128 KiB);
        ``remove`` names parts to clear (``"display_name"``, ``"accent_color"``, ``"logo"``)."""
        body = calls.brand_body(display_name, accent_color, logo, remove)
        return await self._send(calls.call("settings.update_brand", body=body), calls.model(Brand))

    async def notifications(self) -> MailSettings:
        """Which events are mailed to the owner, where and in which language (no address and
        no events when never set), and whether payers may ask for a receipt."""
        call = calls.call("settings.notifications")
        return await self._send(call, calls.model(MailSettings))

    async def update_notifications(
        self,
        email: str,
        events: Sequence[str],
        *,
        language: str | None = None,
        receipts: bool | None = None,
    ) -> MailSettings:
        """Mail ``events`` (invoice event types such as ``invoice.paid``; ``[]`` mails
        nothing) to ``email``, in ``language`` (the service's default: ``en``); ``receipts``
        (default False): whether payers may ask for a receipt on the payment page."""
        body = {
            "email": email,
            "events": list(events),
            **calls.given(language=language, receipts=receipts),
        }
        call = calls.call("settings.update_notifications", body=body)
        return await self._send(call, calls.model(MailSettings))


class AsyncMembers:
    """Wallets that act on the owner's account in the dashboard, as viewer, operator or admin.
    Only the owner's own signature manages them: the client needs ``private_key`` (given an
    ``api_key`` as well, it signs these calls)."""

    def __init__(self, send: AsyncSend) -> None:
        self._send = send

    async def list(self) -> list[Member]:
        return await self._send(calls.call("members.list"), calls.models(Member))

    async def add(self, address: str, role: str) -> Member:
        """Add ``address`` as a ``role`` (viewer, operator or admin) member, or change a
        member's role; the same call again changes nothing."""
        call = calls.call("members.add", body={"address": address, "role": role}, idempotent=True)
        return await self._send(call, calls.model(Member))

    async def remove(self, address: str) -> RemovedMember:
        """Remove a member (404 when not one); its dashboard sessions on the account end."""
        call = calls.call("members.remove", query={"address": address})
        return await self._send(call, calls.model(RemovedMember))


class AsyncReports:
    def __init__(self, send: AsyncSend) -> None:
        self._send = send

    @overload
    async def payments(
        self,
        date_from: int,
        date_to: int,
        *,
        currency: str | None = None,
        format: Literal["csv"] = "csv",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> str: ...

    @overload
    async def payments(
        self,
        date_from: int,
        date_to: int,
        *,
        currency: str | None = None,
        format: Literal["json"],
        limit: int | None = None,
        cursor: str | None = None,
    ) -> PaymentReport: ...

    async def payments(
        self,
        date_from: int,
        date_to: int,
        *,
        currency: str | None = None,
        format: Literal["csv", "json"] = "csv",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> str | PaymentReport:
        """The owner's payments with ``date_from <= paid_at < date_to`` (unix ms), only of
        invoices priced in ``currency`` (ISO 4217) when given. ``format="csv"``: the CSV text,
        a header line then a row a payment, every row at once; ``format="json"``: one page of
        ``limit`` rows (the service's default: 100), the next from ``cursor=next_cursor``."""
        query = {
            "dateFrom": date_from,
            "dateTo": date_to,
            **calls.given(currency=currency),
            "format": format,
            **calls.given(limit=limit, cursor=cursor),
        }
        call = calls.call("reports.payments", query=query)
        if format == "json":
            return await self._send(call, calls.model(PaymentReport))
        return await self._send(call, calls.read_text)
