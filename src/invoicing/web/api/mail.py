"""Which events are mailed to an owner (docs/integration/email.md): both modes.

- ``GET /integration/settings/notifications`` (``notifications.get``): the address, the
  events and the language (no address and no events when never set).
- ``PUT /integration/settings/notifications`` (``notifications.update``): ``email`` and
  ``events`` (invoice and subscription event types; ``[]`` mails nothing), ``language``
  optional (``en``), ``receipts`` optional (``false``): whether payers may ask for a receipt.
"""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.notifications.mail.choices import (
    MAX_EMAIL_CHARS,
    MailChoices,
    mail_choices,
    set_mail_choices,
)
from invoicing.notifications.mail.texts import LANGUAGE_CODES
from invoicing.payments.subscriptions.models import SubscriptionEvent
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address, OwnerQuery
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, OWNER_ROUTE_ERRORS, Answer, documented

router = APIRouter(prefix="/integration/settings", tags=["email"])

MAILED_EVENTS = tuple(event.value for event in (*InvoiceEvent, *SubscriptionEvent))


class MailBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    email: str = Field(min_length=3, max_length=MAX_EMAIL_CHARS, description="A plain address.")
    events: list[str] = Field(
        max_length=len(MAILED_EVENTS),
        description="Event types to mail (`invoice.paid`, `subscription.charged`, …); `[]` "
        "mails nothing.",
    )
    language: str = Field(
        default="en", max_length=16, description=f"One of {', '.join(LANGUAGE_CODES)}."
    )
    receipts: bool = Field(
        default=False,
        description="Whether payers may ask for a receipt on the payment page (mailed when "
        "the invoice is paid).",
    )


class MailSettings(WireModel):
    """The events mailed to an owner, and where."""

    email: str | None = Field(description="The address mail goes to; null: none set.")
    events: list[str] = Field(description="The event types mailed.")
    language: str = Field(description="The language of the mail.")
    receipts: bool = Field(description="Whether payers may ask for a receipt.")

    @classmethod
    def of(cls, choices: MailChoices) -> Self:
        return cls(
            email=choices.email,
            events=list(choices.events),
            language=choices.language,
            receipts=choices.receipts,
        )


@router.get(
    "/notifications",
    **documented(
        "Read which events are mailed to an owner",
        sdk="settings.notifications",
        ok=MailSettings,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="notifications.get",
    ),
)
async def read_mail(request: Request) -> Answer[MailSettings]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "notifications.get", OwnerQuery)
    async with services.db.sessions() as session:
        choices = await mail_choices(session, caller.owner_key)
    return Answer(MailSettings.of(choices))


@router.put(
    "/notifications",
    **documented(
        "Choose which events are mailed to an owner, and where",
        sdk="settings.update_notifications",
        ok=MailSettings,
        body=MailBody,
        errors=BODY_ROUTE_ERRORS,
        action="notifications.update",
    ),
)
async def change_mail(request: Request) -> Answer[MailSettings]:
    services = services_of(request)
    body, caller = await authorized_body(request, "notifications.update", MailBody)
    wanted = MailChoices(body.email, tuple(body.events), body.language, body.receipts)
    async with services.db.transaction() as session:
        choices = await set_mail_choices(
            session, caller.owner_key, wanted, MAILED_EVENTS, services.clock.now_ms()
        )
    return Answer(MailSettings.of(choices))
