"""Who is signed in to the dashboard, and the guards every dashboard request passes.

A request's session comes from its cookie (HttpOnly, SameSite=Strict, and ``Secure`` with the
``__Host-`` prefix outside development). Then, as on the API: an owner the service no longer
admits (``INVOICING_OWNERS``) is refused, and the request counts against the owner's rate
limit. A state-changing request (any method but GET and HEAD) also needs the session's CSRF
token, in the ``csrf`` form field or the ``x-csrf-token`` header, and an ``Origin`` header,
when sent, of this service. A member's session (``auth.team``) is then held to its role,
read again at every request (``roles.ability_of`` says what the request does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from invoicing.auth.admission import check_admitted
from invoicing.auth.sign_in import csrf_matches, live_session
from invoicing.auth.team import Role, may, member_role
from invoicing.errors import Forbidden, InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from invoicing.ratelimit import hit_deferred
from invoicing.settings import Settings
from invoicing.web.context import services_of
from invoicing.web.dashboard.render import dashboard_html
from invoicing.web.dashboard.roles import ability_of

DEV_COOKIE = "invoicing_session"
SECURE_COOKIE = "__Host-invoicing_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = ("GET", "HEAD")


def cookie_name(settings: Settings) -> str:
    return DEV_COOKIE if settings.environment == "development" else SECURE_COOKIE


def set_session_cookie(response: Response, settings: Settings, token: str) -> None:
    response.set_cookie(
        cookie_name(settings),
        token,
        max_age=settings.dashboard_session_ttl_s,
        path="/",
        httponly=True,
        samesite="strict",
        secure=settings.environment != "development",
    )


def clear_session_cookie(response: Response, settings: Settings) -> None:
    response.delete_cookie(
        cookie_name(settings),
        path="/",
        httponly=True,
        samesite="strict",
        secure=settings.environment != "development",
    )


class SignInRequired(Exception):
    """No live session: a page sends the browser to the sign-in page, a script gets 401."""


@dataclass(frozen=True)
class Owner:
    """The account a request acts on, and who signed in: the owner, or a member of their
    team (``member`` their wallet, ``role`` their role)."""

    address: str
    key: str
    csrf: str
    session_id: str
    member: str | None = None
    role: Role | None = None


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(request: Request, settings: Settings) -> bool:
    """Whether the request's ``Origin`` (when the browser sent one) is this service."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin in (origin_of(settings.base_url), origin_of(str(request.base_url)))


async def signed_in(request: Request) -> Owner:
    """The owner of the request's session, after the admission, rate-limit and CSRF checks."""
    return await _signed_in(request, services_of(request).settings.max_body_bytes)


def signed_in_with_form_up_to(max_bytes: int) -> Callable[[Request], Awaitable[Owner]]:
    """:func:`signed_in` for a route whose form may be larger than ``max_body_bytes`` (the
    brand form carries a logo): its CSRF field is read from a form of up to ``max_bytes``."""

    async def dependency(request: Request) -> Owner:
        return await _signed_in(request, max_bytes)

    return dependency


async def _signed_in(request: Request, form_max_bytes: int) -> Owner:
    services = services_of(request)
    settings = services.settings
    now_ms = services.clock.now_ms()
    token = request.cookies.get(cookie_name(settings), "")
    row = await live_session(services.db, token, now_ms)
    if row is None:
        raise SignInRequired()
    check_admitted(services.db, settings.owners, row.owner_address)
    await hit_deferred(
        services.db, [f"api-owner:{row.owner_key}"], settings.owner_rate_limit_per_minute, now_ms
    )
    if request.method not in SAFE_METHODS:
        if not same_origin(request, settings):
            raise Forbidden("this request comes from another site")
        presented = request.headers.get(CSRF_HEADER)
        if presented is None and _is_form(request):
            presented = (await form_fields(request, form_max_bytes)).get("csrf")
        if not csrf_matches(row, presented):
            raise Forbidden("the request lacks this session's CSRF token: reload the page")
    role = None
    if row.member_key is not None:
        role = await member_role(services.db, row.owner_key, row.member_key)
        if role is None:  # removed from the team since
            raise SignInRequired()
        if not may(role, ability_of(request.method, request.url.path)):
            raise Forbidden(f"a team member with the {role.value} role may not do this")
    return Owner(row.owner_address, row.owner_key, row.csrf_token, row.id, row.member_key, role)


SignedIn = Annotated[Owner, Depends(signed_in)]


def _is_form(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")


async def form_fields(request: Request, max_bytes: int) -> dict[str, str]:
    """The fields of a urlencoded form (the dashboard's forms have no files); the last value
    of a repeated name; 413 over ``max_bytes``, 415 for another body type."""
    return dict(await form_pairs(request, max_bytes))


async def form_pairs(request: Request, max_bytes: int) -> list[tuple[str, str]]:
    """Every (name, value) of a urlencoded form, in order (see :func:`form_fields`)."""
    if not _is_form(request):
        raise UnsupportedMediaType("send the form as application/x-www-form-urlencoded")
    body = await request.body()
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"the form is over {max_bytes} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the form is not UTF-8") from None
    try:
        return parse_qsl(text, keep_blank_values=True, max_num_fields=200)
    except ValueError:
        raise InvalidRequest("the form has too many fields") from None


def install(app: FastAPI) -> None:
    """Send a browser without a session to the sign-in page."""

    async def _sign_in_required(request: Request, _exc: Exception) -> Response:
        if request.method in SAFE_METHODS and "hx-request" not in request.headers:
            return RedirectResponse("/dashboard/login", status_code=303)
        body = {"error": {"code": "unauthorized", "message": "sign in to the dashboard"}}
        if request.headers.get("accept", "").startswith("text/html"):
            return HTMLResponse(dashboard_html("sign_in_required.html"), status_code=401)
        return JSONResponse(body, status_code=401)

    app.add_exception_handler(SignInRequired, _sign_in_required)
