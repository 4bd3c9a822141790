"""Signing in and out of the dashboard (docs/dashboard.md#sign-in): the sign-in page, the
EIP-4361 message to sign, the signed message, a login link, and logout.

A team member signs in with their own wallet to the account of the owner who added them
(``account``): the account is named in the message's statement, so a signature opens only
the account the wallet was asked about, and the membership is checked before the session
opens (``auth.team``).

Sign-in attempts count against the client network's limit
(``INVOICING_DASHBOARD_SIGN_IN_PER_MINUTE``) before anything else is done.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from invoicing.addresses import normalize_address
from invoicing.auth.admission import check_admitted
from invoicing.auth.sign_in import (
    NewSession,
    issue_nonce,
    open_session,
    revoke_session,
    spend_link,
    spend_nonce,
    verify_sign_in,
)
from invoicing.auth.siwe import SiweExpectations, SiweMessage
from invoicing.auth.team import member_role
from invoicing.errors import (
    Forbidden,
    InvalidRequest,
    ServiceError,
    Unauthorized,
    UnsupportedMediaType,
)
from invoicing.ratelimit import hit
from invoicing.settings import Settings
from invoicing.web.api.inputs import json_body
from invoicing.web.context import client_network, services_of
from invoicing.web.dashboard.render import HEADERS, page_html
from invoicing.web.dashboard.session import (
    SignedIn,
    clear_session_cookie,
    same_origin,
    set_session_cookie,
)

router = APIRouter(prefix="/dashboard", include_in_schema=False)

NONCE_TTL_MS = 5 * 60_000
# A signed message is accepted only this long after it was issued.
MESSAGE_MAX_AGE_MS = 10 * 60_000
STATEMENT = "Sign in to the invoicing dashboard."


def statement_for(account: str | None) -> str:
    """The message's statement: a member's names the owner's account it opens."""
    if account is None:
        return STATEMENT
    return f"Sign in to the invoicing dashboard as a team member of {account}."


def account_of(data: dict[str, object], signer: str | None = None) -> str | None:
    """The ``account`` a request asks to open (EIP-55), None for the signer's own."""
    account = data.get("account")
    if account is None or account == "":
        return None
    if not isinstance(account, str):
        raise InvalidRequest("account: an EVM address")
    try:
        checksummed = normalize_address(account)
    except ValueError as exc:
        raise InvalidRequest(f"account: {exc}") from None
    return None if signer is not None and checksummed == signer else checksummed


def expectations(settings: Settings) -> SiweExpectations:
    """What a message must name: this service's origin (``INVOICING_BASE_URL``), a chain."""
    parts = urlsplit(settings.base_url)
    return SiweExpectations(
        scheme=parts.scheme,
        domain=parts.netloc,
        chain_ids=frozenset(settings.chain_configs()),
        max_age_ms=MESSAGE_MAX_AGE_MS,
    )


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


async def _limit_client(request: Request) -> None:
    services = services_of(request)
    settings = services.settings
    client = client_network(request, settings.trusted_proxies)
    await hit(
        services.db,
        [f"dashboard-sign-in:{client}"],
        settings.dashboard_sign_in_per_minute,
        services.clock.now_ms(),
    )


def _json_only(request: Request, settings: Settings) -> None:
    """A sign-in POST is JSON from this service's own page: a form on another site can send
    neither the content type nor this Origin."""
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise UnsupportedMediaType("send application/json")
    if not same_origin(request, settings):
        raise Forbidden("this request comes from another site")


def login_page_html() -> str:
    return page_html("login.html", "Sign in")


@router.get("/login", response_class=HTMLResponse)
async def login_page() -> HTMLResponse:
    return HTMLResponse(login_page_html(), headers=HEADERS)


@router.post("/login/message", dependencies=[Depends(_limit_client)])
async def sign_in_message(request: Request) -> JSONResponse:
    """The EIP-4361 message for a wallet to sign: this origin, its chain, a fresh nonce."""
    services = services_of(request)
    settings = services.settings
    _json_only(request, settings)
    data = await json_body(request, settings.max_body_bytes)
    address, chain_id = data.get("address"), data.get("chainId")
    if not isinstance(address, str):
        raise InvalidRequest("address: an EVM address")
    try:
        checksummed = normalize_address(address)
    except ValueError as exc:
        raise InvalidRequest(f"address: {exc}") from None
    expected = expectations(settings)
    if not isinstance(chain_id, int) or chain_id not in expected.chain_ids:
        chain_id = min(expected.chain_ids)
    account = account_of(data, checksummed)
    now_ms = services.clock.now_ms()
    nonce = await issue_nonce(services.db, now_ms, NONCE_TTL_MS)
    message = SiweMessage(
        domain=expected.domain,
        address=checksummed,
        statement=statement_for(account),
        uri=f"{expected.origin}/dashboard/login",
        chain_id=chain_id,
        nonce=nonce,
        issued_at=_iso(now_ms),
        expiration_time=_iso(now_ms + NONCE_TTL_MS),
    )
    return JSONResponse({"message": message.text(), "chainId": chain_id}, headers=HEADERS)


@router.post("/login", dependencies=[Depends(_limit_client)])
async def sign_in(request: Request) -> JSONResponse:
    """A signed message: every field and the signature checked, the nonce spent, a session
    opened; the cookie is set on this answer."""
    services = services_of(request)
    settings = services.settings
    _json_only(request, settings)
    data = await json_body(request, settings.max_body_bytes)
    text, signature = data.get("message"), data.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str):
        raise InvalidRequest("send the signed message and its signature")
    now_ms = services.clock.now_ms()
    checked = await verify_sign_in(
        services.chains,
        text,
        signature,
        expectations(settings),
        now_ms,
        settings.relayer_meta_gas_limit,
    )
    account = account_of(data, checked.owner_address)
    if account is not None and checked.message.statement != statement_for(account):
        raise Unauthorized("the signed message does not name the account asked for")
    if (
        account is not None
        and await member_role(services.db, account.lower(), checked.owner_address.lower()) is None
    ):
        raise Forbidden("this wallet is not a member of that account's team")
    check_admitted(services.db, settings.owners, account or checked.owner_address)
    new = NewSession(
        account or checked.owner_address,
        "siwe",
        checked.message.chain_id,
        _agent(request),
        member_address=None if account is None else checked.owner_address,
    )
    async with services.db.transaction() as session:
        await spend_nonce(session, checked, now_ms)
        _row, token = await open_session(
            session, new, now_ms, settings.dashboard_session_ttl_s * 1000
        )
    response = JSONResponse({"redirect": "/dashboard"}, headers=HEADERS)
    set_session_cookie(response, settings, token)
    return response


@router.get(
    "/login/link/{token}", response_class=HTMLResponse, dependencies=[Depends(_limit_client)]
)
async def sign_in_by_link(request: Request, token: str) -> HTMLResponse:
    """A login link: spent on first use. The answer is a page that moves on to the dashboard
    (a same-site navigation, so the SameSite=Strict cookie goes with it)."""
    services = services_of(request)
    settings = services.settings
    now_ms = services.clock.now_ms()
    try:
        async with services.db.transaction() as session:
            owner = await spend_link(session, token, now_ms)
            check_admitted(services.db, settings.owners, owner)
            _row, session_token = await open_session(
                session,
                NewSession(owner, "link", None, _agent(request)),
                now_ms,
                settings.dashboard_session_ttl_s * 1000,
            )
    except ServiceError as exc:
        return _link_refused(exc)
    body = page_html("signed_in.html", "Signed in", signed_in_as=owner)
    response = HTMLResponse(body, headers=HEADERS)
    set_session_cookie(response, settings, session_token)
    return response


@router.post("/logout")
async def logout(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    async with services.db.transaction() as session:
        await revoke_session(session, owner.key, owner.session_id, services.clock.now_ms())
    response = RedirectResponse("/dashboard/login", status_code=303)
    clear_session_cookie(response, services.settings)
    return response


def _link_refused(exc: ServiceError) -> HTMLResponse:
    """A login link that cannot sign in (used, expired, unknown, or an owner not admitted),
    as a page a person reads, with the way to a new link."""
    reason = exc.message[:1].upper() + exc.message[1:]
    body = page_html("link_refused.html", "This sign-in link cannot be used", reason=reason)
    return HTMLResponse(body, status_code=exc.status, headers=HEADERS)


def _agent(request: Request) -> str | None:
    return request.headers.get("user-agent")
