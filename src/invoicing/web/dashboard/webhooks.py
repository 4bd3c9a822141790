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
from invoicing.notifications.models import EventEndpoint
from invoicing.notifications.service import get_event, list_events
from invoicing.notifications.signing import list_secrets
from invoicing.web.api.event_inputs import EVENT_TYPES
from invoicing.web.api.events import endpoint_rules
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import (
    badge_html,
    button_form_html,
    csrf_input_html,
    e,
    notice_html,
    revocable_cells_html,
    shown_once_html,
    table_html,
    utc_text,
)
from invoicing.web.dashboard.session import Owner, SignedIn, form_pairs
from invoicing.web.dashboard.words import event_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
EVENT_LOG_SIZE = 25

ROTATION_HTML = (
    "<p>While you have signing secrets, every delivery carries "
    "<code>x-service-webhook-signature: t=…,v1=…</code> with one <code>v1</code> per active "
    "secret. To rotate without downtime: create a new secret, give it to your receiver (it "
    "accepts a delivery when any <code>v1</code> matches), then revoke the old one here.</p>"
)


def _events_fieldset(chosen: list[str], prefix: str) -> str:
    boxes = "".join(
        f'<div class="check"><input type="checkbox" id="{prefix}-{i}" name="event" '
        f'value="{e(t)}"{" checked" if t in chosen or ALL_EVENTS in chosen else ""}>'
        f'<label for="{prefix}-{i}">{e(t)}</label></div>'
        for i, t in enumerate(EVENT_TYPES)
    )
    return f"<fieldset><legend>Events (none ticked: all)</legend>{boxes}</fieldset>"


async def webhooks_body_html(request: Request, owner: Owner, top_html: str = "") -> str:
    services = services_of(request)
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        endpoints = await list_endpoints(session, owner.key)
        secrets = await list_secrets(session, owner.key)
    log = await list_events(services.db, services.settings, owner.key, now_ms, limit=EVENT_LOG_SIZE)
    endpoint_rows = []
    for endpoint in endpoints:
        toggle = "disable" if endpoint.enabled else "enable"
        base = f"/dashboard/webhooks/endpoints/{endpoint.id}"
        endpoint_rows.append(
            [
                f'<span class="mono">{e(endpoint.url)}</span><br>'
                f'<span class="muted">{e(endpoint.description or "")}</span>',
                e(", ".join(endpoint.events)),
                badge_html("active" if endpoint.enabled else "disabled")
                + (f"<br>{e(endpoint.disabled_reason)}" if endpoint.disabled_reason else ""),
                '<div class="actions">'
                + button_form_html(f"{base}/ping", "Send test ping", owner.csrf, name=endpoint.url)
                + button_form_html(
                    f"{base}/{toggle}", toggle.capitalize(), owner.csrf, name=endpoint.url
                )
                + f'<a class="button secondary" href="{base}/edit">Edit</a></div>',
            ]
        )
    secret_rows = [
        [
            f'<span class="mono">{e(s.id)}</span>',
            e(utc_text(s.created_at)),
            *revocable_cells_html(
                s.revoked_at, f"/dashboard/webhooks/secrets/{s.id}/revoke", owner.csrf, s.id
            ),
        ]
        for s in secrets
    ]
    event_rows = [
        [
            f'<a href="/dashboard/events/{e(item["id"])}">{e(event_words(item["type"]))}</a>',
            invoice_link_html(item),
            e(utc_text(item["createdAt"])),
            f'<span class="mono">{e(item["id"])}</span>',
            _redeliver_forms(item["id"], endpoints, owner.csrf),
        ]
        for item in log.items
    ]
    return (
        top_html
        + "<h2>Endpoints</h2>"
        + table_html(["URL", "Events", "State", "Actions"], endpoint_rows, "Endpoints", "endpoints")
        + "<h2>Add an endpoint</h2>"
        + '<form class="card" method="post" action="/dashboard/webhooks/endpoints" '
        f'id="add-endpoint">{csrf_input_html(owner.csrf)}'
        '<div class="field"><label for="ep-url">Endpoint URL</label>'
        '<input id="ep-url" name="url" type="url" required maxlength="2048" size="50"></div>'
        '<div class="field"><label for="ep-description">Description</label>'
        '<input id="ep-description" name="description" maxlength="1000"></div>'
        + _events_fieldset([], "ep-new")
        + '<button type="submit">Add endpoint</button></form>'
        + "<h2>Signing secrets</h2>"
        + ROTATION_HTML
        + table_html(
            ["Id", "Created", "State", "Revoke"], secret_rows, "Signing secrets", "secrets"
        )
        + button_form_html("/dashboard/webhooks/secrets", "Create a signing secret", owner.csrf)
        + "<h2>Event log</h2>"
        + table_html(
            ["Event", "Invoice", "Created", "Id", "Redeliver"], event_rows, "Events", "events"
        )
    )


def invoice_link_html(envelope: dict[str, Any]) -> str:
    """A link to the invoice an event is about (its ``data.invoice``), named by its
    ``invoiceId``; a muted dash for an event about none (a test ping)."""
    data = envelope.get("data")
    invoice = data.get("invoice") if isinstance(data, dict) else None
    if not isinstance(invoice, dict) or not isinstance(invoice.get("id"), str):
        return '<span class="muted">none</span>'
    name = invoice.get("invoiceId") or invoice["id"]
    return f'<a href="/dashboard/invoices/{e(invoice["id"])}">{e(str(name))}</a>'


def _redeliver_forms(event_id: str, endpoints: Sequence[EventEndpoint], csrf: str) -> str:
    forms = []
    for endpoint in endpoints:
        endpoint_id, url = endpoint.id, endpoint.url
        forms.append(
            button_form_html(
                f"/dashboard/events/{event_id}/redeliver?endpoint={endpoint_id}",
                "Redeliver",
                csrf,
                name=f"{event_id} to {url}",
            )
        )
    return '<div class="actions">' + "".join(forms) + "</div>"


@router.get("/webhooks", response_class=HTMLResponse)
async def webhooks_page(request: Request, owner: SignedIn) -> HTMLResponse:
    top = notice_html(request.query_params.get("notice"))
    return html("Webhooks", await webhooks_body_html(request, owner, top), owner, "webhooks")


async def _fail(request: Request, owner: Owner, exc: ServiceError) -> HTMLResponse:
    top = notice_html(exc.message, error=True)
    body = await webhooks_body_html(request, owner, top)
    return html("Webhooks", body, owner, "webhooks", exc.status)


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
    if not found:
        return html("Edit endpoint", notice_html("No such endpoint.", error=True), owner, "", 404)
    endpoint = found[0]
    body = (
        f'<form class="card" method="post" action="/dashboard/webhooks/endpoints/{e(endpoint.id)}"'
        f' id="edit-endpoint">{csrf_input_html(owner.csrf)}'
        '<div class="field"><label for="edit-url">Endpoint URL</label>'
        f'<input id="edit-url" name="url" type="url" required size="50" value="{e(endpoint.url)}">'
        '</div><div class="field"><label for="edit-description">Description</label>'
        f'<input id="edit-description" name="description" value="{e(endpoint.description or "")}">'
        "</div>"
        + _events_fieldset(list(endpoint.events), "edit")
        + '<button type="submit">Save</button></form>'
    )
    return html("Edit endpoint", body, owner, "webhooks")


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
    top = shown_once_html(
        "new-secret",
        "Your new signing secret",
        "copy it into your receiver now",
        secret.get_secret_value(),
        f'<p class="muted">Id {e(row.id)}</p>',
    )
    return html("Webhooks", await webhooks_body_html(request, owner, top), owner, "webhooks", 201)


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
    rows = [
        [
            f'<span class="mono">{e(d.url)}</span>',
            badge_html(d.status),
            "<br>".join(
                e(
                    f"#{a.attempt} {utc_text(a.attempted_at)}: "
                    + (f"HTTP {a.status_code}" if a.status_code is not None else a.error or "error")
                )
                for a in d.attempts
            )
            or '<span class="muted">not tried yet</span>',
        ]
        for d in found.deliveries
    ]
    envelope = found.envelope
    body = (
        notice_html(request.query_params.get("notice"))
        + f"<p><strong>{e(event_words(envelope['type']))}</strong> · "
        f"{e(utc_text(envelope['createdAt']))} · "
        f'<span class="mono">{e(envelope["id"])}</span> · invoice '
        + invoice_link_html(envelope)
        + "</p>"
        + table_html(["Sent to", "Status", "Attempts"], rows, "Deliveries", "event-deliveries")
        + "<h2>Send again</h2>"
        + _redeliver_forms(envelope["id"], endpoints, owner.csrf)
    )
    return html("Event", body, owner, "webhooks")
