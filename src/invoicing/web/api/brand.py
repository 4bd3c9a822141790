"""The merchant's brand (docs/integration/payment-page.md#brand): both modes.

- ``GET /integration/settings/brand`` (``brand.get``).
- ``PUT /integration/settings/brand`` (``brand.update``): ``displayName``,
  ``accentColor`` and ``logo`` (base64 of a PNG, JPEG or WebP file of at most 128 KiB); a
  field given replaces, ``null`` removes, a field left out stays. Its body may be up to
  ``BRAND_MAX_BODY_BYTES`` (the logo's base64 is larger than other bodies).
"""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.brand import service as brands
from invoicing.brand.logo import MAX_LOGO_BYTES
from invoicing.brand.service import (
    MAX_DISPLAY_NAME_CHARS,
    UNSET,
    check_brand_update,
    get_brand,
    update_brand,
)
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address, OwnerQuery
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.page.render import logo_path
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, OWNER_ROUTE_ERRORS, Answer, documented

router = APIRouter(prefix="/integration/settings", tags=["brand"])

# base64 of the largest logo, with room for the other fields.
BRAND_MAX_BODY_BYTES = (MAX_LOGO_BYTES * 4) // 3 + 8 * 1024


class BrandBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    displayName: str | None = Field(
        default=None,
        max_length=4 * MAX_DISPLAY_NAME_CHARS,
        description="1 to 64 characters once trimmed; null removes it.",
    )
    accentColor: str | None = Field(
        default=None,
        max_length=16,
        description='"#rrggbb"; text on it is black or white, whichever contrasts more.',
    )
    logo: str | None = Field(
        default=None,
        max_length=BRAND_MAX_BODY_BYTES,
        description="base64 of a PNG, JPEG or WebP file of at most 128 KiB (no SVG); "
        "the service decodes it and serves its own PNG.",
    )


class Brand(WireModel):
    """An owner's brand as the payment page shows it (every part null until set)."""

    displayName: str | None
    accentColor: str | None
    textColor: str | None = Field(description="Black or white: the text colour on the accent.")
    logoUrl: str | None = Field(description="The re-encoded PNG, served by the service.")

    @classmethod
    def of(cls, brand: brands.Brand, payment_page_url: str) -> Self:
        logo = (
            None
            if brand.logo_sha256 is None
            else payment_page_url.rstrip("/") + logo_path(brand.logo_sha256)
        )
        return cls(
            displayName=brand.display_name,
            accentColor=brand.accent_color,
            textColor=brand.text_color,
            logoUrl=logo,
        )


@router.get(
    "/brand",
    **documented(
        "Read an owner's brand (payment page name, logo, colour)",
        ok=Brand,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="brand.get",
        sdk="settings.brand",
    ),
)
async def read_brand(request: Request) -> Answer[Brand]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "brand.get", OwnerQuery)
    async with services.db.sessions() as session:
        brand = await get_brand(session, caller.owner_key)
    return Answer(Brand.of(brand, services.settings.payment_page_url))


@router.put(
    "/brand",
    **documented(
        "Change an owner's brand (given fields replace, null removes)",
        ok=Brand,
        body=BrandBody,
        errors=BODY_ROUTE_ERRORS,
        action="brand.update",
        sdk="settings.update_brand",
    ),
)
async def change_brand(request: Request) -> Answer[Brand]:
    services = services_of(request)
    body, caller = await authorized_body(
        request, "brand.update", BrandBody, max_bytes=BRAND_MAX_BODY_BYTES
    )
    given = body.model_fields_set
    update = await check_brand_update(
        display_name=body.displayName if "displayName" in given else UNSET,
        accent_color=body.accentColor if "accentColor" in given else UNSET,
        logo=body.logo if "logo" in given else UNSET,
    )
    async with services.db.transaction() as session:
        brand = await update_brand(session, caller.owner_key, services.clock.now_ms(), update)
    return Answer(Brand.of(brand, services.settings.payment_page_url))
