"""API key management (DESIGN section 4): signature mode only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from invoicing.api.deps import authorize, services_of
from invoicing.api.inputs import Address, json_body, owner_address_of, query_items, validate
from invoicing.api.inputs import without_owner as payload_of
from invoicing.auth.api_keys import create_api_key, key_to_dict, list_api_keys, revoke_api_key

router = APIRouter(prefix="/integration/api-keys", tags=["api keys"])


class CreateKeyBody(BaseModel):
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


@router.post("", status_code=201, summary="Issue an API key (shown once)")
async def create(request: Request) -> JSONResponse:
    services = services_of(request)
    data = await json_body(request, services.settings.max_body_bytes)
    owner = owner_address_of(data)
    await authorize(
        request, "apikey.create", owner, payload_of(data), from_query=False, allow_api_key=False
    )
    body = validate(CreateKeyBody, data)
    async with services.db.transaction() as session:
        row, api_key = await create_api_key(
            session,
            body.ownerAddress,
            body.label,
            services.settings.secret,
            services.clock.now_ms(),
        )
    return JSONResponse(
        {"id": row.id, "apiKey": api_key, "label": row.label, "createdAt": row.created_at},
        status_code=201,
    )


@router.get("", summary="List an owner's API keys (without secrets)")
async def list_(request: Request, ownerAddress: Annotated[str, Query()]) -> JSONResponse:
    services = services_of(request)
    items = query_items(request)
    owner = owner_address_of(items)
    await authorize(
        request, "apikey.list", owner, payload_of(items), from_query=True, allow_api_key=False
    )
    validate(OwnerQuery, items)
    async with services.db.sessions() as session:
        rows = await list_api_keys(session, owner.lower())
    return JSONResponse({"items": [key_to_dict(row) for row in rows]})


@router.delete("", summary="Revoke an API key")
async def revoke(
    request: Request, ownerAddress: Annotated[str, Query()], id: Annotated[str, Query()]
) -> JSONResponse:
    services = services_of(request)
    items = query_items(request)
    owner = owner_address_of(items)
    await authorize(
        request, "apikey.revoke", owner, payload_of(items), from_query=True, allow_api_key=False
    )
    query = validate(RevokeKeyQuery, items)
    async with services.db.transaction() as session:
        row = await revoke_api_key(session, owner.lower(), query.id, services.clock.now_ms())
    return JSONResponse({"revoked": True, "id": row.id, "revokedAt": row.revoked_at})
