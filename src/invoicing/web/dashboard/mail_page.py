"""Email: which events are mailed to the owner, and where (the same domain calls as
``PUT /integration/settings/notifications``; docs/integration/email.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.errors import InvalidRequest
from invoicing.notifications.mail.choices import MailChoices, mail_choices, set_mail_choices
from invoicing.notifications.mail.texts import LANGUAGE_CODES
from invoicing.web.api.mail import MAILED_EVENTS
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.session import Owner, SignedIn, form_pairs

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def _mail_page(
    owner: Owner, choices: MailChoices, status_code: int = 200, **top: object
) -> HTMLResponse:
    """The page; ``top``: ``notice`` and ``configured`` (whether mail can leave), or an
    ``error`` above the form alone."""
    values = {"notice": None, "error": None, "configured": True} | top
    return html_page(
        "email.html",
        "Email",
        owner,
        "email",
        status_code,
        choices=choices,
        events=MAILED_EVENTS,
        languages=LANGUAGE_CODES,
        **values,
    )


@router.get("/email", response_class=HTMLResponse)
async def mail_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    async with services.db.sessions() as session:
        choices = await mail_choices(session, owner.key)
    configured = services.settings.smtp_url is not None and bool(services.settings.smtp_from)
    notice = request.query_params.get("notice")
    return _mail_page(owner, choices, notice=notice, configured=configured)


@router.post("/email")
async def save_mail(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    pairs = await form_pairs(request, services.settings.max_body_bytes)
    fields = dict(pairs)
    wanted = MailChoices(
        fields.get("email", ""),
        tuple(value for name, value in pairs if name == "events"),
        fields.get("language", "en"),
        fields.get("receipts") == "true",
    )
    try:
        async with services.db.transaction() as session:
            await set_mail_choices(
                session, owner.key, wanted, MAILED_EVENTS, services.clock.now_ms()
            )
    except InvalidRequest as exc:
        return _mail_page(owner, wanted, 400, error=exc.message)
    return RedirectResponse("/dashboard/email?notice=Saved", status_code=303)
