"""Webhook signing secrets and owner settings (docs/integration/webhooks.md): both modes.

- ``POST /integration/webhook-secrets`` (``webhook_secret.create``) → 201, the secret shown
  only in this answer; at most ``signing.MAX_ACTIVE_SECRETS`` active per owner (409
  ``too_many_webhook_secrets``), and at most ``webhook_secret_issuance_per_hour`` issued.
- ``GET /integration/webhook-secrets`` (``webhook_secret.list``): ids and dates, never secrets.
- ``DELETE /integration/webhook-secrets?id=`` (``webhook_secret.revoke``): 404 if not the
  owner's.
- ``GET`` / ``PUT /integration/settings`` (``settings.get`` / ``settings.update``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from invoicing.actions.keys import end_webhook_secret, issue_webhook_secret
from invoicing.errors import NotFound, TooManyWebhookSecrets
from invoicing.notifications.signing import (
    MAX_CAPTURE_WINDOW_S,
    MAX_TOLERANCE_BPS,
    MIN_CAPTURE_WINDOW_S,
    get_settings,
    list_secrets,
    update_settings,
)
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.event_responses import (
    IssuedWebhookSecret,
    OwnerSettings,
    RevokedWebhookSecret,
    WebhookSecret,
    WebhookSecretList,
)
from invoicing.web.api.inputs import Address, OwnerBody, OwnerQuery
from invoicing.web.context import services_of
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, OWNER_ROUTE_ERRORS, Answer, documented

router = APIRouter(prefix="/integration", tags=["webhook signing"])


class RevokeSecretQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    id: str = Field(min_length=1, max_length=36)


class SettingsBody(BaseModel):
    """The settings to change, at least one; an omitted one stays as it is (null is refused:
    omitted and null differ)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    webhookApiKeyHeader: bool | None = None
    underpaymentToleranceBps: int | None = Field(
        default=None,
        ge=0,
        le=MAX_TOLERANCE_BPS,
        description="A payment short of the amount due by at most this share (basis points, "
        "0 to 500) pays invoices created from now on.",
    )
    reportingCurrency: str | None = Field(
        default=None,
        max_length=3,
        description='The ISO 4217 currency (such as "USD") the dashboard shows values and '
        'totals in; "" clears it.',
    )
    captureWindowS: int | None = Field(
        default=None,
        ge=MIN_CAPTURE_WINDOW_S,
        le=MAX_CAPTURE_WINDOW_S,
        description="How long a paid manual-capture invoice waits for its capture, from "
        "paidAt (seconds, an hour to 30 days); applies to invoices already paid too.",
    )
    captureAtWindowEnd: bool | None = Field(
        default=None,
        description="At the end of the capture window: capture (true) or leave the invoice "
        "for a void (false).",
    )

    @model_validator(mode="after")
    def _something_given(self) -> SettingsBody:
        given = self.model_fields_set - {"ownerAddress"}
        if not given:
            raise ValueError("give at least one setting to change")
        if any(getattr(self, name) is None for name in given):
            raise ValueError("a setting cannot be null: omit it to keep it")
        return self


@router.post(
    "/webhook-secrets",
    **documented(
        "Create a webhook signing secret (shown once)",
        ok=IssuedWebhookSecret,
        status=201,
        body=OwnerBody,
        errors=(*BODY_ROUTE_ERRORS, TooManyWebhookSecrets),
        action="webhook_secret.create",
        sdk="webhook_secrets.create",
    ),
)
async def create(request: Request) -> Answer[IssuedWebhookSecret]:
    services = services_of(request)
    _body, caller = await authorized_body(request, "webhook_secret.create", OwnerBody)
    row, secret = await issue_webhook_secret(services, caller.owner_key)
    issued = IssuedWebhookSecret(
        id=row.id, secret=secret.get_secret_value(), createdAt=row.created_at
    )
    return Answer(issued, status_code=201)


@router.get(
    "/webhook-secrets",
    **documented(
        "List an owner's webhook signing secrets (ids and dates, never the secrets)",
        ok=WebhookSecretList,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="webhook_secret.list",
        sdk="webhook_secrets.list",
    ),
)
async def list_(request: Request) -> Answer[WebhookSecretList]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "webhook_secret.list", OwnerQuery)
    async with services.db.sessions() as session:
        rows = await list_secrets(session, caller.owner_key)
    items = [
        WebhookSecret(id=row.id, createdAt=row.created_at, revokedAt=row.revoked_at) for row in rows
    ]
    return Answer(WebhookSecretList(items=items))


@router.delete(
    "/webhook-secrets",
    **documented(
        "Revoke a webhook signing secret",
        ok=RevokedWebhookSecret,
        query=RevokeSecretQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="webhook_secret.revoke",
        sdk="webhook_secrets.revoke",
    ),
)
async def revoke(request: Request) -> Answer[RevokedWebhookSecret]:
    services = services_of(request)
    query, caller = await authorized_query(request, "webhook_secret.revoke", RevokeSecretQuery)
    row = await end_webhook_secret(services, caller.owner_key, query.id)
    assert row.revoked_at is not None  # revoked just above, or before
    return Answer(RevokedWebhookSecret(revoked=True, id=row.id, revokedAt=row.revoked_at))


@router.get(
    "/settings",
    **documented(
        "Read an owner's settings",
        ok=OwnerSettings,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="settings.get",
        sdk="settings.get",
    ),
)
async def read_settings(request: Request) -> Answer[OwnerSettings]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "settings.get", OwnerQuery)
    async with services.db.sessions() as session:
        choices = await get_settings(session, caller.owner_key)
    return Answer(OwnerSettings.of(choices))


@router.put(
    "/settings",
    **documented(
        "Change an owner's settings",
        ok=OwnerSettings,
        body=SettingsBody,
        errors=BODY_ROUTE_ERRORS,
        action="settings.update",
        sdk="settings.update",
    ),
)
async def change_settings(request: Request) -> Answer[OwnerSettings]:
    services = services_of(request)
    body, caller = await authorized_body(request, "settings.update", SettingsBody)
    async with services.db.transaction() as session:
        choices = await update_settings(
            session,
            caller.owner_key,
            body.webhookApiKeyHeader,
            services.clock.now_ms(),
            underpayment_tolerance_bps=body.underpaymentToleranceBps,
            reporting_currency=body.reportingCurrency,
            capture_window_s=body.captureWindowS,
            capture_at_window_end=body.captureAtWindowEnd,
        )
    return Answer(OwnerSettings.of(choices))
