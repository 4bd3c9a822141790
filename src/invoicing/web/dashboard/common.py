"""What the dashboard's pages share: token names, amounts, explorer links, answers."""

from __future__ import annotations

from typing import Any

from fastapi.responses import HTMLResponse, JSONResponse

from invoicing.chain.gateway import configured_symbol
from invoicing.errors import ServiceError, UnsupportedChain
from invoicing.invoices.amounts import to_decimal_string
from invoicing.services import Services
from invoicing.web.dashboard.render import HEADERS, e, page
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


def explorer_link_html(services: Services, chain_id: int, kind: str, value: str) -> str:
    """``value`` (a transaction hash or an address) linked to the chain's explorer, if any."""
    try:
        explorer = services.chains.get(chain_id).config.explorer
    except UnsupportedChain:
        explorer = None
    text = f'<span class="mono">{e(value)}</span>'
    if explorer is None:
        return text
    return f'<a href="{e(explorer)}/{kind}/{e(value)}" rel="noopener noreferrer">{text}</a>'


def html(
    title: str, body_html: str, owner: Owner, active: str, status_code: int = 200
) -> HTMLResponse:
    return HTMLResponse(
        page(title, body_html, owner=owner.address, csrf=owner.csrf, active=active),
        status_code=status_code,
        headers=HEADERS,
    )


def json_answer(body: dict[str, Any], status_code: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status_code, headers=HEADERS)


def error_json(exc: ServiceError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=HEADERS)
