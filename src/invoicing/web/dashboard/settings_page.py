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
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import (
    attrs,
    csrf_input_html,
    e,
    facts_html,
    notice_html,
    table_html,
    utc_text,
)
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)


async def _fees_html(services: Services, owner: Owner) -> str:
    parts = []
    for chain in services.chains.all():
        config = chain.config
        cid = config.chain_id
        try:
            fees = await fee_settings(services, cid, owner.address)
            current = facts_html(
                [
                    ("Fee", e(f"{fees.fee_bps} bps ({fees.fee_bps / 100:.2f}%)")),
                    ("Fee goes to", e(fees.payout_address or "nobody (no fee)")),
                    ("Changes signed so far", e(fees.nonce)),
                ]
            )
        except ServiceError as exc:
            current = notice_html(f"Cannot read this chain now: {exc.message}", error=True)
        parts.append(
            f'<section class="card" id="fees-{cid}"><h3>{e(config.name)} (chain {cid})</h3>'
            f"{current}"
            f'<form method="post" action="/dashboard/settings/fee" data-sign="fee" '
            f'data-prepare="/dashboard/settings/fee/prepare" id="fee-form-{cid}">'
            f'{csrf_input_html(owner.csrf)}<input type="hidden" name="chainId" value="{cid}">'
            f'<div class="field"><label for="fee-{cid}">Fee (basis points, at most 500)</label>'
            f'<input id="fee-{cid}" name="feeBps" type="number" min="0" max="500" required></div>'
            '<button type="submit">Sign and set the fee</button>'
            '<p data-status role="status" aria-live="polite"></p></form>'
            f'<form method="post" action="/dashboard/settings/payout" data-sign="payout" '
            f'data-prepare="/dashboard/settings/payout/prepare" id="payout-form-{cid}">'
            f'{csrf_input_html(owner.csrf)}<input type="hidden" name="chainId" value="{cid}">'
            f'<div class="field"><label for="payout-{cid}">Address that receives the fee</label>'
            f'<input id="payout-{cid}" name="payoutAddress" required size="44"></div>'
            '<button type="submit">Sign and set the payout</button>'
            '<p data-status role="status" aria-live="polite"></p></form>'
            f'<p><a class="button secondary" href="/dashboard/escrows.ndjson?chain={cid}" '
            f'download id="export-{cid}">Download the escrow export (NDJSON)</a></p></section>'
        )
    return "".join(parts)


async def _delegate_html(services: Services, owner: Owner) -> str:
    """Per chain: whether the service's delegate key may refund for the owner, and the form
    that names or revokes it."""
    account = service_delegate(services.settings)
    if account is None:
        return "<p>This service holds no refund delegate key: refund from each invoice's page.</p>"
    parts = [
        "<p>Name this service as your <strong>refund delegate</strong> and your shop's API key "
        "can refund a payer (POST /integration/invoices/refund): the service signs the refund "
        f"with its key <code>{e(account.address)}</code>. Refunds go only to the payer of "
        "record, at most what the escrow holds; the key can sign nothing else.</p>"
    ]
    for chain in services.chains.all():
        cid = chain.config.chain_id
        try:
            named = await chain.refund_delegate(owner.address)
            on = named is not None and named.lower() == account.address.lower()
            state = "named: your shop can refund" if on else "not named"
        except ServiceError as exc:
            on, state = False, f"cannot read this chain now: {exc.message}"
        choice, label, look = (
            ("revoke", "Sign and revoke", ' class="secondary"')
            if on
            else ("name", "Sign and name it", "")
        )
        parts.append(
            f'<form class="card" method="post" action="/dashboard/settings/refund-delegate" '
            f'data-sign="delegate" data-prepare="/dashboard/settings/refund-delegate/prepare" '
            f'id="delegate-form-{cid}">{csrf_input_html(owner.csrf)}'
            f'<input type="hidden" name="chainId" value="{cid}">'
            f'<input type="hidden" name="choice" value="{choice}">'
            f"<p>{e(chain.config.name)} (chain {cid}): {e(state)}</p>"
            f'<button type="submit"{look}>{label}</button>'
            '<p data-status role="status" aria-live="polite"></p></form>'
        )
    return "".join(parts)


RECOVERY_HTML = (
    "<h2>Recovering funds without this service</h2>"
    "<p>The export lists every escrow you ever had on a chain with its salt. With it, anyone "
    "can sweep your escrows to you, even if this service is gone:</p>"
    "<ol><li>Download the export of each chain above and keep it somewhere safe (an escrow "
    "created after the download needs the next one).</li>"
    "<li>Install the command (<code>pip install .</code> in a checkout of this project).</li>"
    "<li>Run <code>invoicing recover --rpc-url https://rpc.example --factory 0x… --owner "
    "0xYOU --from escrows.ndjson --sender-key env:GAS_KEY --dry-run</code>, then again "
    "without <code>--dry-run</code>. The sender key only pays gas: the funds go to you.</li>"
    "</ol>"
)


async def settings_body_html(request: Request, owner: Owner, top_html: str = "") -> str:
    services = services_of(request)
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        choices = await get_settings(session, owner.key)
        sessions = await list_sessions(session, owner.key, now_ms)
    header = choices.webhook_api_key_header
    session_rows = [
        [
            e(utc_text(row.created_at)) + (" (this one)" if row.id == owner.session_id else ""),
            # A team member's session says whose wallet it is (auth.team).
            e(row.method if row.member_key is None else f"{row.method}, member {row.member_key}"),
            e(utc_text(row.last_seen_at)),
            e((row.user_agent or "")[:60]),
            (
                f'<form method="post" action="/dashboard/settings/sessions/{e(row.id)}/revoke">'
                f'{csrf_input_html(owner.csrf)}<button type="submit" class="danger" '
                f'aria-label="End the session started {e(utc_text(row.created_at))}">'
                "End</button></form>"
            ),
        ]
        for row in sessions
    ]
    return (
        top_html
        + _reporting_html(owner, choices.reporting_currency)
        + "<h2>Fee and payout</h2>"
        + '<details class="advanced" id="fees"><summary>Only for a platform that takes a fee '
        "from each payment it receives for you (a single shop leaves this alone)</summary>"
        "<p>A share of each payment goes to the address you set, the rest to you. Changes are "
        "signed in your wallet (EIP-712) and relayed by the service, which pays the gas.</p>"
        + await _fees_html(services, owner)
        + "</details>"
        + '<h2 id="refund-delegate">Refunds from your shop</h2>'
        + await _delegate_html(services, owner)
        + RECOVERY_HTML
        + "<h2>Paid webhook</h2>"
        + '<form class="card" method="post" action="/dashboard/settings/webhook-header" '
        f'id="header-form">{csrf_input_html(owner.csrf)}<div class="check">'
        f'<input type="checkbox" id="api-key-header" name="webhookApiKeyHeader" value="true"'
        f'{" checked" if header else ""}><label for="api-key-header">The paid webhook carries '
        "the API key that created the invoice (turn off once you verify signatures)</label>"
        '</div><button type="submit">Save</button></form>'
        + "<h2>Dashboard sessions</h2>"
        + table_html(
            ["Signed in", "How", "Last seen", "Browser", "End"],
            session_rows,
            "Dashboard sessions",
            "sessions",
        )
    )


def _reporting_html(owner: Owner, currency: str | None) -> str:
    return (
        '<h2 id="reporting">Reporting currency</h2>'
        '<form class="card" method="post" action="/dashboard/settings/reporting" '
        f'id="reporting-form">{csrf_input_html(owner.csrf)}'
        '<div class="field"><label for="reporting-currency">Show values and totals in '
        "(an ISO 4217 code such as USD; empty: token amounts only)</label>"
        '<input id="reporting-currency" name="reportingCurrency" maxlength="3" size="5" '
        f'autocomplete="off"{attrs(value=currency)}></div>'
        '<p class="muted">An invoice priced in a currency shows its price; any other shows its '
        "amount at the rate when it was paid (a token pegged to the currency, else the "
        "chain's price feed).</p>"
        '<button type="submit">Save</button></form>'
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
        top = notice_html(exc.message, error=True)
        body = await settings_body_html(request, owner, top)
        return html("Settings", body, owner, "settings", exc.status)
    return RedirectResponse("/dashboard/settings?notice=Saved#reporting", status_code=303)


@router.get("/settings", response_class=HTMLResponse)
async def settings_page(request: Request, owner: SignedIn) -> HTMLResponse:
    top = notice_html(request.query_params.get("notice"))
    return html("Settings", await settings_body_html(request, owner, top), owner, "settings")


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
