"""Settings: the fee and payout address per chain and the service's refund delegate (signed
in the wallet as EIP-712 and relayed: ``web.dashboard.signed``), whether the paid webhook
carries the API key, the escrow export with the recovery steps beside it, and the owner's
dashboard sessions."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from invoicing.auth.sign_in import list_sessions, revoke_session
from invoicing.errors import InvalidRequest, ServiceError
from invoicing.fees.service import fee_settings
from invoicing.invoices.export import export_escrows
from invoicing.notifications.signing import get_settings, update_settings
from invoicing.refunds.delegated import service_delegate
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.render import utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)


async def _chains(services: Services, owner: Owner) -> list[dict[str, object]]:
    """Each chain's fee, payout address and count of signed changes (or why not)."""
    chains: list[dict[str, object]] = []
    for chain in services.chains.all():
        config = chain.config
        found: dict[str, object] = {"id": config.chain_id, "name": config.name, "unreadable": None}
        try:
            fees = await fee_settings(services, config.chain_id, owner.address)
        except ServiceError as exc:
            found["unreadable"] = exc.message
        else:
            found["fees"] = [
                ("Fee", f"{fees.fee_bps} bps ({fees.fee_bps / 100:.2f}%)"),
                ("Fee goes to", fees.payout_address or "nobody (no fee)"),
                ("Changes signed so far", fees.nonce),
            ]
        chains.append(found)
    return chains


async def _delegates(services: Services, owner: Owner) -> dict[str, object] | None:
    """Per chain: whether the service's delegate key may refund for the owner (None: the
    service holds no delegate key)."""
    account = service_delegate(services.settings)
    if account is None:
        return None
    chains: list[dict[str, object]] = []
    for chain in services.chains.all():
        try:
            named = await chain.refund_delegate(owner.address)
            on = named is not None and named.lower() == account.address.lower()
            state = "named: your shop can refund" if on else "not named"
        except ServiceError as exc:
            on, state = False, f"cannot read this chain now: {exc.message}"
        chains.append(
            {"id": chain.config.chain_id, "name": chain.config.name, "on": on, "state": state}
        )
    return {"address": account.address, "chains": chains}


async def _settings_page(
    request: Request, owner: Owner, status_code: int = 200, **top: str | None
) -> HTMLResponse:
    """The page; ``top``: a ``notice`` or an ``error`` above it."""
    services = services_of(request)
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        choices = await get_settings(session, owner.key)
        sessions = await list_sessions(session, owner.key, now_ms)
    session_rows = [
        {
            "id": row.id,
            "created": utc_text(row.created_at),
            "this_one": row.id == owner.session_id,
            # A team member's session says whose wallet it is (auth.team).
            "how": row.method
            if row.member_key is None
            else f"{row.method}, member {row.member_key}",
            "last_seen": utc_text(row.last_seen_at),
            "browser": (row.user_agent or "")[:60],
        }
        for row in sessions
    ]
    return html_page(
        "settings.html",
        "Settings",
        owner,
        "settings",
        status_code,
        reporting_currency=choices.reporting_currency,
        chains=await _chains(services, owner),
        api_key_header=choices.webhook_api_key_header,
        delegate=await _delegates(services, owner),
        sessions=session_rows,
        **({"notice": None, "error": None} | top),
    )


@router.post("/settings/reporting")
async def reporting(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    code = fields.get("reportingCurrency", "").strip().upper()
    try:
        async with services.db.transaction() as session:
            await update_settings(
                session, owner.key, None, services.clock.now_ms(), reporting_currency=code
            )
    except ServiceError as exc:
        return await _settings_page(request, owner, exc.status, error=exc.message)
    return RedirectResponse("/dashboard/settings?notice=Saved#reporting", status_code=303)


@router.get("/settings", response_class=HTMLResponse)
async def settings_page(request: Request, owner: SignedIn) -> HTMLResponse:
    return await _settings_page(request, owner, notice=request.query_params.get("notice"))


@router.post("/settings/webhook-header")
async def webhook_header(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    async with services.db.transaction() as session:
        await update_settings(
            session,
            owner.key,
            fields.get("webhookApiKeyHeader") == "true",
            services.clock.now_ms(),
        )
    return RedirectResponse("/dashboard/settings?notice=Saved", status_code=303)


@router.post("/settings/sessions/{session_id}/revoke")
async def end_session(request: Request, session_id: str, owner: SignedIn) -> Response:
    services = services_of(request)
    async with services.db.transaction() as session:
        await revoke_session(session, owner.key, session_id[:36], services.clock.now_ms())
    if session_id == owner.session_id:
        return RedirectResponse("/dashboard/login", status_code=303)
    return RedirectResponse("/dashboard/settings?notice=Session+ended", status_code=303)


@router.get("/escrows.ndjson")
async def escrow_export(request: Request, owner: SignedIn) -> StreamingResponse:
    """Every escrow of the owner on a chain with its salt (as the API's export)."""
    services = services_of(request)
    chain = request.query_params.get("chain", "")
    if not (chain.isascii() and chain.isdigit() and len(chain) < 19):
        raise InvalidRequest("chain: a chain id")
    # 400 unsupported_chain before the stream starts
    factories = services.chains.get(int(chain)).config.factories
    return StreamingResponse(
        export_escrows(services.db, owner.key, int(chain), factories),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="escrows-{chain}.ndjson"',
            "Cache-Control": "no-store",
        },
    )
