"""The escrow export route: every escrow of an owner on a chain, with its salt (NDJSON)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from invoicing.errors import UnsupportedChain
from invoicing.invoices.export import export_escrows
from invoicing.web.api.deps import authorized_query
from invoicing.web.api.inputs import Address
from invoicing.web.api.responses import EscrowExportLine
from invoicing.web.context import services_of
from invoicing.web.routedocs import OWNER_ROUTE_ERRORS, documented, schema_ref

router = APIRouter(prefix="/integration/escrows", tags=["escrows"])

NDJSON = "application/x-ndjson"


class ExportQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)


@router.get(
    "/export",
    response_class=StreamingResponse,
    **documented(
        "Export every escrow of an owner on a chain with its salt (NDJSON)",
        query=ExportQuery,
        errors=(*OWNER_ROUTE_ERRORS, UnsupportedChain),
        ok_response={
            "description": "One EscrowExportLine (JSON) a line, oldest first.",
            "content": {
                NDJSON: {
                    "schema": {"type": "string"},
                    "x-ndjson-item": schema_ref(EscrowExportLine),
                }
            },
        },
        action="escrow.export",
        sdk="escrows.export",
    ),
)
async def export(request: Request) -> StreamingResponse:
    services = services_of(request)
    query, caller = await authorized_query(request, "escrow.export", ExportQuery)
    # 400 unsupported_chain before the stream starts
    factories = services.chains.get(query.chainId).config.factories
    return StreamingResponse(
        export_escrows(services.db, caller.owner_key, query.chainId, factories),
        media_type=NDJSON,
    )
