"""Request models of the events and webhook-endpoint routes (``events.py``): bodies and
queries, with the event types endpoints take and the events list filters on."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.notifications.service import DELIVERY_STATUSES
from invoicing.payments.subscriptions.models import SubscriptionEvent
from invoicing.tables.notifications import PING
from invoicing.web.api.inputs import Address

ID = Field(min_length=1, max_length=36)
URL = Field(max_length=2048)
# The types an endpoint subscribes to and the events list filters on: the invoices' events
# and the subscriptions'.
EVENT_TYPES = tuple(str(event) for event in (*InvoiceEvent, *SubscriptionEvent))
EVENTS = Field(min_length=1, max_length=len(EVENT_TYPES))
DESCRIPTION = Field(default=None, max_length=1000)


class CreateEndpointBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    url: str = URL
    events: list[str] = EVENTS
    description: str | None = DESCRIPTION


class UpdateEndpointBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    url: str | None = Field(default=None, max_length=2048)
    events: list[str] | None = Field(default=None, min_length=1, max_length=len(EVENT_TYPES))
    enabled: bool | None = None
    description: str | None = DESCRIPTION

    @model_validator(mode="after")
    def _changes_something(self) -> UpdateEndpointBody:
        if all(v is None for v in (self.url, self.events, self.enabled, self.description)):
            raise ValueError("give at least one of url, events, enabled, description")
        return self


class EndpointQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    id: str = ID


class IdQuery(BaseModel):
    """The query of a POST or PATCH that names an endpoint (the owner is in the body)."""

    model_config = ConfigDict(extra="forbid")

    id: str = ID


class EventsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    type: str | None = None
    deliveryStatus: str | None = Field(
        default=None,
        description=(
            "Only events with at least one delivery that is pending (due or being retried), "
            "failing (pending after a failed attempt), delivered, or failed (given up)."
        ),
        json_schema_extra={"enum": list(DELIVERY_STATUSES)},
    )
    after: str | None = Field(default=None, min_length=1, max_length=36)
    limit: int = Field(default=20, ge=1, lt=2**31)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        return _one_of(value, (*EVENT_TYPES, PING))

    @field_validator("deliveryStatus")
    @classmethod
    def _known_delivery_status(cls, value: str | None) -> str | None:
        return _one_of(value, DELIVERY_STATUSES)


def _one_of(value: str | None, known: tuple[str, ...]) -> str | None:
    if value is not None and value not in known:
        raise ValueError(f"must be one of {', '.join(known)}")
    return value


class EventQuery(BaseModel):
    """An event's detail: a page of its deliveries, oldest first."""

    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    after: str | None = Field(
        default=None,
        min_length=1,
        max_length=36,
        description="The last delivery id of the previous page.",
    )
    limit: int = Field(default=20, ge=1, lt=2**31, description="Deliveries (at most 100).")


class RedeliverBody(BaseModel):
    """Exactly one target: ``endpointId`` (one of the owner's endpoints) or
    ``"webhookUrl": true`` (the invoice's webhookUrl; ``invoice.paid`` events only)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    endpointId: str | None = Field(default=None, min_length=1, max_length=36)
    webhookUrl: bool | None = None

    @model_validator(mode="after")
    def _one_target(self) -> RedeliverBody:
        if (self.endpointId is None) == (self.webhookUrl is not True):
            raise ValueError('give either endpointId or "webhookUrl": true')
        return self
