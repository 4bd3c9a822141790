"""Events and webhook endpoints (docs/integration/webhooks.md): both auth modes.

- ``POST /integration/webhook-endpoints`` (``webhook_endpoint.create``) → 201 the endpoint;
  ``GET`` (``webhook_endpoint.list``); ``PATCH ?id=`` (``webhook_endpoint.update``);
  ``DELETE ?id=`` (``webhook_endpoint.delete``); ``POST /test?id=``
  (``webhook_endpoint.test``) → 202, a ``ping`` event to that endpoint.
- ``GET /integration/events`` (``event.list``; filters ``type=`` and ``deliveryStatus=``),
  ``GET /integration/events/{id}`` (``event.get``; its deliveries paged, ``after=``),
  ``POST /integration/events/{id}/redeliver`` (``event.redeliver``) → 202.

Each redelivery and test ping queues a delivery the worker sends: an owner may ask for at
most ``event_redelivery_per_hour`` redeliveries and ``webhook_test_per_hour`` pings an hour
(429 ``rate_limited``, counted before anything is read or queued, so a refused one queues
nothing; ``actions.keys``, shared with the dashboard).

In signature mode the payload is the body (POST, PATCH) or the query (GET, DELETE) without
``ownerAddress``, as everywhere; an id that travels in the path, or in the query of a POST
or PATCH, is signed too, as the payload's first key ``id``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from invoicing.actions.keys import send_again, send_test_ping
from invoicing.auth.guard import Caller
from invoicing.errors import InvalidRequest, NotFound, TooManyWebhookEndpoints
from invoicing.notifications.endpoints import (
    EndpointChange,
    EndpointRules,
    create_endpoint,
    delete_endpoint,
    list_endpoints,
    update_endpoint,
)
from invoicing.notifications.service import (
    get_event,
    list_events,
)
from invoicing.settings import Settings
from invoicing.web.api.deps import Model, authorize, authorized_body, authorized_query
from invoicing.web.api.event_inputs import (
    EVENT_TYPES,
    CreateEndpointBody,
    EndpointQuery,
    EventQuery,
    EventsQuery,
    IdQuery,
    RedeliverBody,
    UpdateEndpointBody,
)
from invoicing.web.api.event_responses import (
    DeletedWebhookEndpoint,
    DeliveryAccepted,
    EventDetail,
    EventEnvelope,
    EventList,
    WebhookEndpoint,
    WebhookEndpointList,
)
from invoicing.web.api.inputs import (
    OwnerBody,
    OwnerQuery,
    json_body,
    owner_address_of,
    query_items,
    query_types,
    validate,
    without_owner,
)
from invoicing.web.context import services_of
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, OWNER_ROUTE_ERRORS, Answer, documented

router = APIRouter(prefix="/integration", tags=["events"])


def endpoint_rules(settings: Settings) -> EndpointRules:
    """Endpoint URLs follow the webhookUrl rules (``api.invoices.create_rules``)."""
    return EndpointRules(
        require_https=settings.environment != "development" and not settings.webhook_allow_http,
        allow_private=settings.webhook_allow_private,
        max_per_owner=settings.max_event_endpoints_per_owner,
        event_types=EVENT_TYPES,
    )


async def authorized_body_with_id(
    request: Request, action: str, model: type[Model], path_id: str | None = None
) -> tuple[Model, Caller, str]:
    """A JSON body and an id (from the path, else the query's ``id``), signed together."""
    if path_id is None:
        path_id = validate(IdQuery, query_items(request)).id
    else:
        path_id = _checked_path_id(path_id)
    data = await json_body(request, services_of(request).settings.max_body_bytes)
    payload = {"id": path_id, **without_owner(data)}
    caller = await authorize(request, action, owner_address_of(data), payload)
    return validate(model, data), caller, path_id


def _checked_path_id(value: str) -> str:
    """An id from the path, held to the query's rules (NUL is refused everywhere)."""
    if not 1 <= len(value) <= 36 or "\x00" in value:
        raise InvalidRequest("id: must be 1 to 36 characters, without NUL", {"field": "id"})
    return value


@router.post(
    "/webhook-endpoints",
    **documented(
        "Register a webhook endpoint for events",
        ok=WebhookEndpoint,
        status=201,
        body=CreateEndpointBody,
        errors=(*BODY_ROUTE_ERRORS, TooManyWebhookEndpoints),
        action="webhook_endpoint.create",
        sdk="webhook_endpoints.create",
    ),
)
async def create(request: Request) -> Answer[WebhookEndpoint]:
    services = services_of(request)
    body, caller = await authorized_body(request, "webhook_endpoint.create", CreateEndpointBody)
    async with services.db.transaction() as session:
        endpoint = await create_endpoint(
            session,
            caller.owner_key,
            body.url,
            body.events,
            body.description,
            endpoint_rules(services.settings),
            services.clock.now_ms(),
        )
        view = WebhookEndpoint.of(endpoint)
    return Answer(view, status_code=201)


@router.get(
    "/webhook-endpoints",
    **documented(
        "List an owner's webhook endpoints",
        ok=WebhookEndpointList,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="webhook_endpoint.list",
        sdk="webhook_endpoints.list",
    ),
)
async def list_(request: Request) -> Answer[WebhookEndpointList]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "webhook_endpoint.list", OwnerQuery)
    async with services.db.sessions() as session:
        endpoints = await list_endpoints(session, caller.owner_key)
        items = [WebhookEndpoint.of(endpoint) for endpoint in endpoints]
    return Answer(WebhookEndpointList(items=items))


@router.patch(
    "/webhook-endpoints",
    **documented(
        "Change a webhook endpoint's url, events, description or enabled",
        ok=WebhookEndpoint,
        query=IdQuery,
        body=UpdateEndpointBody,
        errors=(*BODY_ROUTE_ERRORS, NotFound),
        action="webhook_endpoint.update",
        sdk="webhook_endpoints.update",
    ),
)
async def update(request: Request) -> Answer[WebhookEndpoint]:
    services = services_of(request)
    body, caller, endpoint_id = await authorized_body_with_id(
        request, "webhook_endpoint.update", UpdateEndpointBody
    )
    change = EndpointChange(
        url=body.url, events=body.events, enabled=body.enabled, description=body.description
    )
    async with services.db.transaction() as session:
        endpoint = await update_endpoint(
            session,
            caller.owner_key,
            endpoint_id,
            change,
            endpoint_rules(services.settings),
            services.clock.now_ms(),
        )
        view = WebhookEndpoint.of(endpoint)
    return Answer(view)


@router.delete(
    "/webhook-endpoints",
    **documented(
        "Remove a webhook endpoint",
        ok=DeletedWebhookEndpoint,
        query=EndpointQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="webhook_endpoint.delete",
        sdk="webhook_endpoints.delete",
    ),
)
async def delete(request: Request) -> Answer[DeletedWebhookEndpoint]:
    services = services_of(request)
    query, caller = await authorized_query(request, "webhook_endpoint.delete", EndpointQuery)
    async with services.db.transaction() as session:
        await delete_endpoint(session, caller.owner_key, query.id, services.clock.now_ms())
    return Answer(DeletedWebhookEndpoint(deleted=True, id=query.id))


@router.post(
    "/webhook-endpoints/test",
    **documented(
        "Send a ping event to one webhook endpoint",
        ok=DeliveryAccepted,
        status=202,
        query=IdQuery,
        body=OwnerBody,
        errors=(*BODY_ROUTE_ERRORS, NotFound),
        action="webhook_endpoint.test",
        sdk="webhook_endpoints.test",
    ),
)
async def test(request: Request) -> Answer[DeliveryAccepted]:
    services = services_of(request)
    _body, caller, endpoint_id = await authorized_body_with_id(
        request, "webhook_endpoint.test", OwnerBody
    )
    accepted = await send_test_ping(services, caller.owner_key, endpoint_id)
    return Answer(DeliveryAccepted.of(accepted), status_code=202)


@router.get(
    "/events",
    **documented(
        "List an owner's events, newest first (cursor: after=<id>)",
        ok=EventList,
        query=EventsQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="event.list",
        sdk=("events.page", "events.list"),
    ),
)
async def events(request: Request) -> Answer[EventList]:
    services = services_of(request)
    query, caller = await authorized_query(request, "event.list", EventsQuery)
    page = await list_events(
        services.db,
        services.settings,
        caller.owner_key,
        services.clock.now_ms(),
        event_type=query.type,
        delivery_status=query.deliveryStatus,
        after=query.after,
        limit=query.limit,
    )
    items = [EventEnvelope.model_validate(envelope) for envelope in page.items]
    return Answer(EventList(items=items, hasMore=page.has_more))


@router.get(
    "/events/{event_id}",
    **documented(
        "One event with a page of its deliveries and their attempts (cursor: after=<id>)",
        ok=EventDetail,
        query=EventQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="event.get",
        sdk="events.get",
    ),
)
async def event(request: Request, event_id: str) -> Answer[EventDetail]:
    services = services_of(request)
    items = query_items(request)
    payload: dict[str, Any] = {"id": _checked_path_id(event_id), **without_owner(items)}
    caller = await authorize(
        request,
        "event.get",
        owner_address_of(items),
        payload,
        query_types={"id": "string", **query_types(EventQuery)},
    )
    query = validate(EventQuery, items)
    found = await get_event(
        services.db,
        services.settings,
        caller.owner_key,
        event_id,
        services.clock.now_ms(),
        after=query.after,
        limit=query.limit,
    )
    return Answer(EventDetail.of(found))


@router.post(
    "/events/{event_id}/redeliver",
    **documented(
        "Send an event again, to one endpoint or to the invoice's webhookUrl",
        ok=DeliveryAccepted,
        status=202,
        body=RedeliverBody,
        errors=(*BODY_ROUTE_ERRORS, NotFound),
        action="event.redeliver",
        sdk="events.redeliver",
    ),
)
async def redeliver_event(request: Request, event_id: str) -> Answer[DeliveryAccepted]:
    services = services_of(request)
    body, caller, event_id = await authorized_body_with_id(
        request, "event.redeliver", RedeliverBody, path_id=event_id
    )
    accepted = await send_again(services, caller.owner_key, event_id, body.endpointId)
    return Answer(DeliveryAccepted.of(accepted), status_code=202)
