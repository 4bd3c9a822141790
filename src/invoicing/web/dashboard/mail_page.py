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
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import csrf_input_html, e, notice_html
from invoicing.web.dashboard.session import Owner, SignedIn, form_pairs

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def mail_form_html(owner: Owner, choices: MailChoices) -> str:
    checks = "".join(
        f'<div class="check"><input type="checkbox" id="mail-{e(event)}" name="events" '
        f'value="{e(event)}"{" checked" if event in choices.events else ""}>'
        f'<label for="mail-{e(event)}">{e(event)}</label></div>'
        for event in MAILED_EVENTS
    )
    languages = "".join(
        f'<option value="{e(code)}"{" selected" if code == choices.language else ""}>'
        f"{e(code)}</option>"
        for code in LANGUAGE_CODES
    )
    return (
        '<form class="card" method="post" action="/dashboard/email" id="mail-form">'
        f"{csrf_input_html(owner.csrf)}"
        '<div class="field"><label for="mail-email">Address</label>'
        f'<input id="mail-email" name="email" type="email" required size="40" '
        f'value="{e(choices.email or "")}"></div>'
        f"<fieldset><legend>Events mailed</legend>{checks}</fieldset>"
        '<div class="check"><input type="checkbox" id="mail-receipts" name="receipts" '
        f'value="true"{" checked" if choices.receipts else ""}><label for="mail-receipts">'
        "Payers may ask for a receipt on the payment page (mailed to them once paid)"
        "</label></div>"
        '<div class="field"><label for="mail-language">Language</label>'
        f'<select id="mail-language" name="language">{languages}</select></div>'
        '<button type="submit">Save</button></form>'
    )


@router.get("/email", response_class=HTMLResponse)
async def mail_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    async with services.db.sessions() as session:
        choices = await mail_choices(session, owner.key)
    configured = services.settings.smtp_url is not None and services.settings.smtp_from
    body = (
        notice_html(request.query_params.get("notice"))
        + "<h2>Email</h2><p>The events chosen here are mailed to the address, through the "
        "service's mail server, retried until it takes them.</p>"
        + ("" if configured else notice_html("No mail server is configured: mail waits."))
        + mail_form_html(owner, choices)
    )
    return html("Email", body, owner, "email")


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
        body = notice_html(exc.message, error=True) + mail_form_html(owner, wanted)
        return html("Email", body, owner, "email", status_code=400)
    return RedirectResponse("/dashboard/email?notice=Saved", status_code=303)
