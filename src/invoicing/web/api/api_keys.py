"""API key management (docs/integration/authentication.md): signature mode only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.actions.keys import end_api_key, issue_api_key
from invoicing.auth.api_keys import (
    list_api_keys,
)
from invoicing.errors import NotFound
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address
from invoicing.web.api.responses import ApiKey, ApiKeyList, IssuedApiKey, RevokedApiKey
from invoicing.web.context import services_of
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    SIGNATURE_AUTH,
    Answer,
    documented,
)

router = APIRouter(prefix="/integration/api-keys", tags=["api keys"])


class CreateKeyBody(BaseModel):
    """Body of POST /integration/api-keys."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    label: str | None = Field(default=None, max_length=200)


class RevokeKeyQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    id: str = Field(min_length=1, max_length=36)


class OwnerQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address


@router.post(
    "",
    **documented(
        "Issue an API key (shown once; request signature only)",
        ok=IssuedApiKey,
        status=201,
        body=CreateKeyBody,
        errors=BODY_ROUTE_ERRORS,
        auth=SIGNATURE_AUTH,
        action="apikey.create",
        sdk="api_keys.create",
    ),
)
async def create(request: Request) -> Answer[IssuedApiKey]:
    services = services_of(request)
    body, caller = await authorized_body(
        request, "apikey.create", CreateKeyBody, allow_api_key=False
    )
    row, api_key = await issue_api_key(services, body.ownerAddress, body.label)
    issued = IssuedApiKey(
        id=row.id, apiKey=api_key.get_secret_value(), label=row.label, createdAt=row.created_at
    )
    return Answer(issued, status_code=201)


@router.get(
    "",
    **documented(
        "List an owner's API keys (without secrets; request signature only)",
        ok=ApiKeyList,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        auth=SIGNATURE_AUTH,
        action="apikey.list",
        sdk="api_keys.list",
    ),
)
async def list_(request: Request) -> Answer[ApiKeyList]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "apikey.list", OwnerQuery, allow_api_key=False)
    async with services.db.sessions() as session:
        rows = await list_api_keys(session, caller.owner_key)
    items = [
        ApiKey(id=row.id, label=row.label, createdAt=row.created_at, revokedAt=row.revoked_at)
        for row in rows
    ]
    return Answer(ApiKeyList(items=items))


@router.delete(
    "",
    **documented(
        "Revoke an API key (request signature only)",
        ok=RevokedApiKey,
        query=RevokeKeyQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        auth=SIGNATURE_AUTH,
        action="apikey.revoke",
        sdk="api_keys.revoke",
    ),
)
async def revoke(request: Request) -> Answer[RevokedApiKey]:
    services = services_of(request)
    query, caller = await authorized_query(
        request, "apikey.revoke", RevokeKeyQuery, allow_api_key=False
    )
    row = await end_api_key(services, caller.owner_key, query.id)
    assert row.revoked_at is not None  # revoked just above, or before
    return Answer(RevokedApiKey(revoked=True, id=row.id, revokedAt=row.revoked_at))
