"""Webhooks: endpoints (add, edit, disable or enable, test ping), signing secrets (create,
shown once; revoke; the rotation explained), and the event log with redelivery. Each action
is the API's domain call (``notifications``, ``actions.keys``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.actions.keys import end_webhook_secret, issue_webhook_secret, send_test_ping
from invoicing.errors import InvalidRequest, ServiceError
from invoicing.notifications.endpoints import (
    ALL_EVENTS,
    EndpointChange,
    create_endpoint,
    list_endpoints,
    update_endpoint,
)
from invoicing.notifications.service import Attempt, get_event, list_events
from invoicing.notifications.signing import list_secrets
from invoicing.tables.notifications import EventEndpoint, WebhookAttempt
from invoicing.web.api.event_inputs import EVENT_TYPES
from invoicing.web.api.events import endpoint_rules
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.render import utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_pairs
from invoicing.web.dashboard.words import event_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
EVENT_LOG_SIZE = 25


def ticked(events: Sequence[str]) -> list[str]:
    """The event types an endpoint's form shows ticked (all of them for "all events")."""
    return list(EVENT_TYPES) if ALL_EVENTS in events else list(events)


def attempt_lines(attempts: Sequence[Attempt | WebhookAttempt]) -> list[str]:
    """A delivery's attempts, one line each: "#1 <when>: HTTP 500"."""
    return [
        f"#{a.attempt} {utc_text(a.attempted_at)}: "
        + (f"HTTP {a.status_code}" if a.status_code is not None else a.error or "error")
        for a in attempts
    ]


def _endpoint_row(endpoint: EventEndpoint) -> dict[str, object]:
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "description": endpoint.description or "",
        "events": ", ".join(endpoint.events),
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "toggle": "disable" if endpoint.enabled else "enable",
        "base": f"/dashboard/webhooks/endpoints/{endpoint.id}",
    }


async def _webhooks_page(
    request: Request, owner: Owner, status_code: int = 200, **top: object
) -> HTMLResponse:
    """The page; ``top``: what shows above it (``notice``, ``error`` or the ``fresh``
    signing secret, shown once)."""
    services = services_of(request)
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        endpoints = await list_endpoints(session, owner.key)
        secrets = await list_secrets(session, owner.key)
    log = await list_events(services.db, services.settings, owner.key, now_ms, limit=EVENT_LOG_SIZE)
    secret_rows = [
        {
            "id": s.id,
            "created": utc_text(s.created_at),
            "revoked": utc_text(s.revoked_at) if s.revoked_at else None,
            "revoke_action": f"/dashboard/webhooks/secrets/{s.id}/revoke",
            "name": s.id,
        }
        for s in secrets
    ]
    event_rows = [
        {
            "id": item["id"],
            "type": event_words(item["type"]),
            "invoice": invoice_of(item),
            "created": utc_text(item["createdAt"]),
        }
        for item in log.items
    ]
    return html_page(
        "webhooks.html",
        "Webhooks",
        owner,
        "webhooks",
        status_code,
        endpoints=[_endpoint_row(endpoint) for endpoint in endpoints],
        secrets=secret_rows,
        events=event_rows,
        event_types=EVENT_TYPES,
        **({"notice": None, "error": None, "fresh": None} | top),
    )


def invoice_of(envelope: dict[str, Any]) -> dict[str, str] | None:
    """The invoice an event is about (its ``data.invoice``): its id and the name it is shown
    by (the owner's ``invoiceId``, else the id); None for an event about none (a test ping)."""
    data = envelope.get("data")
    invoice = data.get("invoice") if isinstance(data, dict) else None
    if not isinstance(invoice, dict) or not isinstance(invoice.get("id"), str):
        return None
    return {"id": invoice["id"], "name": str(invoice.get("invoiceId") or invoice["id"])}


@router.get("/webhooks", response_class=HTMLResponse)
async def webhooks_page(request: Request, owner: SignedIn) -> HTMLResponse:
    return await _webhooks_page(request, owner, notice=request.query_params.get("notice"))


async def _fail(request: Request, owner: Owner, exc: ServiceError) -> HTMLResponse:
    return await _webhooks_page(request, owner, exc.status, error=exc.message)


def _back(notice: str) -> RedirectResponse:
    return RedirectResponse(f"/dashboard/webhooks?notice={notice}", status_code=303)


async def _events_of(request: Request) -> tuple[dict[str, str], list[str]]:
    """The form's fields and its ticked events (none: all)."""
    pairs = await form_pairs(request, services_of(request).settings.max_body_bytes)
    ticked = [value for name, value in pairs if name == "event"]
    return dict(pairs), ticked or [ALL_EVENTS]


@router.post("/webhooks/endpoints")
async def add_endpoint(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    fields, events = await _events_of(request)
    try:
        async with services.db.transaction() as session:
            await create_endpoint(
                session,
                owner.key,
                fields.get("url", "").strip(),
                events,
                fields.get("description", "").strip()[:1000] or None,
                endpoint_rules(services.settings),
                services.clock.now_ms(),
            )
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return _back("Endpoint+added")


@router.get("/webhooks/endpoints/{endpoint_id}/edit", response_class=HTMLResponse)
async def edit_page(request: Request, endpoint_id: str, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    async with services.db.sessions() as session:
        found = [x for x in await list_endpoints(session, owner.key) if x.id == endpoint_id]
    endpoint = None
    if found:
        endpoint = _endpoint_row(found[0]) | {"events": ticked(found[0].events)}
    return html_page(
        "endpoint_edit.html",
        "Edit endpoint",
        owner,
        "webhooks" if found else "",
        200 if found else 404,
        endpoint=endpoint,
        event_types=EVENT_TYPES,
    )


async def _change(
    request: Request, owner: Owner, endpoint_id: str, change: EndpointChange
) -> Response:
    services = services_of(request)
    try:
        async with services.db.transaction() as session:
            await update_endpoint(
                session,
                owner.key,
                endpoint_id[:36],
                change,
                endpoint_rules(services.settings),
                services.clock.now_ms(),
            )
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return _back("Endpoint+saved")


@router.post("/webhooks/endpoints/{endpoint_id}")
async def edit(request: Request, endpoint_id: str, owner: SignedIn) -> Response:
    fields, events = await _events_of(request)
    url = fields.get("url", "").strip()
    if not url:
        return await _fail(request, owner, InvalidRequest("url: required"))
    change = EndpointChange(
        url=url, events=events, description=fields.get("description", "").strip()[:1000]
    )
    return await _change(request, owner, endpoint_id, change)


@router.post("/webhooks/endpoints/{endpoint_id}/disable")
async def disable(request: Request, endpoint_id: str, owner: SignedIn) -> Response:
    return await _change(request, owner, endpoint_id, EndpointChange(enabled=False))


@router.post("/webhooks/endpoints/{endpoint_id}/enable")
async def enable(request: Request, endpoint_id: str, owner: SignedIn) -> Response:
    return await _change(request, owner, endpoint_id, EndpointChange(enabled=True))


@router.post("/webhooks/endpoints/{endpoint_id}/ping")
async def test_ping(request: Request, endpoint_id: str, owner: SignedIn) -> Response:
    services = services_of(request)
    try:
        await send_test_ping(services, owner.key, endpoint_id[:36])
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return _back("Test+ping+queued")


@router.post("/webhooks/secrets", response_class=HTMLResponse)
async def create_secret(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    try:
        row, secret = await issue_webhook_secret(services, owner.key)
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    fresh = {
        "box_id": "new-secret",
        "title": "Your new signing secret",
        "advice": "copy it into your receiver now",
        "secret": secret.get_secret_value(),
        "extra": f"Id {row.id}",
    }
    return await _webhooks_page(request, owner, 201, fresh=fresh)


@router.post("/webhooks/secrets/{secret_id}/revoke")
async def revoke_secret(request: Request, secret_id: str, owner: SignedIn) -> Response:
    services = services_of(request)
    try:
        await end_webhook_secret(services, owner.key, secret_id[:36])
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return _back("Secret+revoked")


@router.get("/events/{event_id}", response_class=HTMLResponse)
async def event_page(request: Request, event_id: str, owner: SignedIn) -> HTMLResponse:
    """One event: its deliveries, each with every attempt, and redelivery."""
    services = services_of(request)
    found = await get_event(
        services.db, services.settings, owner.key, event_id[:36], services.clock.now_ms()
    )
    async with services.db.sessions() as session:
        endpoints = await list_endpoints(session, owner.key)
    deliveries = [
        {"url": d.url, "status": d.status, "attempts": attempt_lines(d.attempts)}
        for d in found.deliveries
    ]
    return html_page(
        "event.html",
        "Event",
        owner,
        "webhooks",
        notice=request.query_params.get("notice"),
        envelope=found.envelope,
        words=event_words(found.envelope["type"]),
        invoice=invoice_of(found.envelope),
        created=utc_text(found.envelope["createdAt"]),
        deliveries=deliveries,
        endpoints=endpoints,
    )
