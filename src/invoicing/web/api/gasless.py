"""An owner's gasless payments, per chain: ``GET /integration/gasless`` and
``POST /integration/gasless`` (``gasless.opt_in``). Off until the owner turns them on."""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.errors import UnsupportedChain
from invoicing.payments.opt_in import GaslessChoice, gasless_choice, set_gasless
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    AddressOut,
    Answer,
    documented,
)

router = APIRouter(tags=["gasless payments"])


class GaslessQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)


class GaslessBody(BaseModel):
    """Body of POST /integration/gasless."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    enabled: bool


class GaslessSettings(WireModel):
    """Whether payers may pay the owner's invoices on the chain without gas; each such
    payment's gas counts against the owner's share of the relayer's daily budget."""

    chainId: int
    enabled: bool
    tokens: list[AddressOut] = Field(
        description="The chain's tokens that can be paid without gas (EIP-3009)."
    )

    @classmethod
    def of(cls, choice: GaslessChoice) -> Self:
        return cls(chainId=choice.chain_id, enabled=choice.enabled, tokens=list(choice.tokens))


@router.get(
    "/integration/gasless",
    **documented(
        "Whether the owner's invoices on a chain can be paid without gas",
        ok=GaslessSettings,
        query=GaslessQuery,
        errors=(*OWNER_ROUTE_ERRORS, UnsupportedChain),
        action="gasless.get",
        sdk="gasless.get",
    ),
)
async def get_gasless(request: Request) -> Answer[GaslessSettings]:
    query, _caller = await authorized_query(request, "gasless.get", GaslessQuery)
    choice = await gasless_choice(services_of(request), query.ownerAddress, query.chainId)
    return Answer(GaslessSettings.of(choice))


@router.post(
    "/integration/gasless",
    **documented(
        "Turn gasless payments of the owner's invoices on a chain on or off",
        ok=GaslessSettings,
        body=GaslessBody,
        errors=(*BODY_ROUTE_ERRORS, UnsupportedChain),
        action="gasless.set",
        sdk="gasless.set",
    ),
)
async def post_gasless(request: Request) -> Answer[GaslessSettings]:
    body, _caller = await authorized_body(request, "gasless.set", GaslessBody)
    choice = await set_gasless(services_of(request), body.ownerAddress, body.chainId, body.enabled)
    return Answer(GaslessSettings.of(choice))
