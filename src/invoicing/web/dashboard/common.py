"""What the dashboard's pages share: token names, amounts, explorer links, answers."""

from __future__ import annotations

from typing import Any

from fastapi.responses import HTMLResponse, JSONResponse

from invoicing.chain.gateway import configured_symbol
from invoicing.errors import ServiceError, UnsupportedChain
from invoicing.invoices.amounts import round_up_shown, to_decimal_string
from invoicing.invoices.fiat import FiatValue
from invoicing.notifications.signing import get_settings
from invoicing.services import Services
from invoicing.web.dashboard.render import HEADERS, page_html
from invoicing.web.dashboard.session import Owner


def symbol(services: Services, chain_id: int, token: str | None) -> str:
    try:
        return configured_symbol(services.chains.get(chain_id).config, token)
    except UnsupportedChain:
        return "ETH" if token is None else token[:10] + "…"


def chain_name(services: Services, chain_id: int) -> str:
    try:
        return services.chains.get(chain_id).config.name
    except UnsupportedChain:
        return f"Chain {chain_id}"


def amount_text(raw: int | str, decimals: int) -> str:
    return to_decimal_string(int(raw), decimals)


def short_amount_text(raw: int | str, decimals: int, token: str) -> str:
    """A token amount for a list: 6 significant digits, "≈" when that is not exact."""
    exact = int(raw)
    shown = round_up_shown(exact, decimals)
    return ("" if shown == exact else "≈ ") + f"{to_decimal_string(shown, decimals)} {token}"


async def reporting_currency(services: Services, owner: Owner) -> str | None:
    """The currency the owner chose to see values in (Settings), or None."""
    async with services.db.sessions() as session:
        return (await get_settings(session, owner.key)).reporting_currency


def fiat_fact(value: FiatValue | None) -> dict[str, object] | None:
    """A fiat value's text, and whether it is the locked price (else: at the rate when it
    was paid), for ``m.amount_with_fiat``."""
    return None if value is None else {"text": value.text(), "locked": value.locked}


def explorer_link(
    services: Services, chain_id: int, kind: str, value: str
) -> dict[str, str | None]:
    """``value`` (a transaction hash or an address) and its page on the chain's explorer,
    if any (``m.explorer`` draws it)."""
    try:
        explorer = services.chains.get(chain_id).config.explorer
    except UnsupportedChain:
        explorer = None
    return {"value": value, "href": None if explorer is None else f"{explorer}/{kind}/{value}"}


def html_page(
    name: str, title: str, owner: Owner, active: str, status_code: int = 200, **values: Any
) -> HTMLResponse:
    """The page template ``name`` for a signed-in owner, with the dashboard's headers."""
    return HTMLResponse(
        page_html(name, title, owner=owner.address, csrf=owner.csrf, active=active, **values),
        status_code=status_code,
        headers=HEADERS,
    )


def json_answer(body: dict[str, Any], status_code: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status_code, headers=HEADERS)


def error_json(exc: ServiceError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=HEADERS)
