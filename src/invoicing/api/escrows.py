"""The escrow export route: every escrow of an owner on a chain, with its salt (NDJSON)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from invoicing.api.deps import authorized_query
from invoicing.api.inputs import Address, query_schema
from invoicing.invoices.export import export_escrows
from invoicing.services import services_of

router = APIRouter(prefix="/integration/escrows", tags=["escrows"])

NDJSON = "application/x-ndjson"


class ExportQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)


@router.get(
    "/export",
    openapi_extra=query_schema(ExportQuery),
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "One JSON object a line, oldest first: "
            '{"paymentAddress","salt","tokenAddress","invoiceId","status","chainId"}',
            "content": {NDJSON: {"schema": {"type": "string"}}},
        }
    },
    summary="Export every escrow of an owner on a chain with its salt (NDJSON)",
)
async def export(request: Request) -> StreamingResponse:
    services = services_of(request)
    query, caller = await authorized_query(request, "escrow.export", ExportQuery)
    services.chains.get(query.chainId)  # 400 unsupported_chain before the stream starts
    return StreamingResponse(
        export_escrows(services.db, caller.owner_key, query.chainId), media_type=NDJSON
    )
