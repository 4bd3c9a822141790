"""Signing in to the dashboard over real HTTP (SIWE, login links, sessions, CSRF), and every
refusal leaving nothing behind: no session row, no spent nonce, no change."""

from __future__ import annotations

import hashlib
import time

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.auth.sign_in import issue_link, purge_sign_in
from invoicing.chain.deploy import DevDeployment
from invoicing.tables.auth import DashboardSession, SignInTicket
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import (
    csrf_of,
    dashboard_app,
    personal_sign,
    sign_in,
    sign_in_message,
)
from tests.support.signing import new_owner


async def session_count(app: RunningApp, owner: str) -> int:
    async with app.services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(DashboardSession)
            .where(DashboardSession.owner_key == owner.lower())
        )
    return int(count or 0)


@pytest.fixture
async def dash(make_services: MakeServices) -> RunningApp:
    async with dashboard_app(make_services) as app:
        yield app  # type: ignore[misc]


async def test_a_wallet_signs_in_and_sees_its_dashboard(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    message = await sign_in_message(dash.http, owner, dev.chain_id)
    port = dash.base_url.rsplit(":", 1)[1]

    answer = await dash.http.post(
        "/dashboard/login", json={"message": message, "signature": personal_sign(owner, message)}
    )

    assert message.startswith(f"127.0.0.1:{port} wants you to sign in with your Ethereum account:")
    assert f"\nURI: {dash.base_url}/dashboard/login\n" in message
    assert f"\nChain ID: {dev.chain_id}\n" in message
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"redirect": "/dashboard"}
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("invoicing_session=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    page = await dash.http.get("/dashboard")
    assert page.status_code == 200
    assert owner.address in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert await session_count(dash, owner.address) == 1


async def refused_sign_in(
    app: RunningApp, owner: LocalAccount, message: str, signature: str
) -> httpx.Response:
    before = await session_count(app, owner.address)
    fresh = httpx.AsyncClient(base_url=app.base_url)
    async with fresh:
        answer = await fresh.post(
            "/dashboard/login", json={"message": message, "signature": signature}
        )
        assert "set-cookie" not in answer.headers
        assert (await fresh.get("/dashboard")).status_code == 303
    assert await session_count(app, owner.address) == before
    return answer


async def test_a_replayed_message_is_refused(dash: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    message = await sign_in_message(dash.http, owner, dev.chain_id)
    signature = personal_sign(owner, message)
    first = await dash.http.post(
        "/dashboard/login", json={"message": message, "signature": signature}
    )
    assert first.status_code == 200

    answer = await refused_sign_in(dash, owner, message, signature)

    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == (
        "the message's nonce is unknown, used or expired: sign in again"
    )


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("127.0.0.1:", "evil.example:", "the message is for another domain"),
        ("Issued At: 20", "Issued At: 19", "the message is too old"),
        ("Expiration Time: 20", "Expiration Time: 19", "the message has expired"),
    ],
)
async def test_a_message_for_elsewhere_or_out_of_time_is_refused_and_its_nonce_kept(
    dash: RunningApp, dev: DevDeployment, old: str, new: str, problem: str
) -> None:
    owner = new_owner()
    message = await sign_in_message(dash.http, owner, dev.chain_id)
    changed = message.replace(old, new, 1)
    assert changed != message

    answer = await refused_sign_in(dash, owner, changed, personal_sign(owner, changed))

    assert answer.status_code == 401
    assert answer.json()["error"] == {"code": "unauthorized", "message": problem}
    # The nonce was not spent: the untouched message still signs in.
    ok = await dash.http.post(
        "/dashboard/login", json={"message": message, "signature": personal_sign(owner, message)}
    )
    assert ok.status_code == 200


async def test_a_signature_by_another_key_is_refused(dash: RunningApp, dev: DevDeployment) -> None:
    owner, thief = new_owner(), new_owner()
    message = await sign_in_message(dash.http, owner, dev.chain_id)

    answer = await refused_sign_in(dash, owner, message, personal_sign(thief, message))

    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == "the signature is not by the message's address"
    assert await session_count(dash, thief.address) == 0


async def test_a_sign_in_post_from_a_form_or_another_site_is_refused(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    message = await sign_in_message(dash.http, owner, dev.chain_id)
    body = {"message": message, "signature": personal_sign(owner, message)}

    as_form = await dash.http.post("/dashboard/login", data=body)
    cross_site = await dash.http.post(
        "/dashboard/login", json=body, headers={"origin": "https://evil.example"}
    )

    assert as_form.status_code == 415
    assert cross_site.status_code == 403
    assert await session_count(dash, owner.address) == 0


async def test_csrf_is_needed_to_sign_out_and_a_revoked_session_is_refused(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    assert (await sign_in(dash.http, owner, dev.chain_id)).status_code == 200
    csrf = csrf_of((await dash.http.get("/dashboard")).text)
    cookie = dash.http.cookies["invoicing_session"]

    without = await dash.http.post("/dashboard/logout", data={})
    wrong = await dash.http.post("/dashboard/logout", data={"csrf": csrf + "x"})
    assert without.status_code == 403 and wrong.status_code == 403
    assert (await dash.http.get("/dashboard")).status_code == 200  # still signed in

    out = await dash.http.post("/dashboard/logout", data={"csrf": csrf})

    assert out.status_code == 303 and out.headers["location"] == "/dashboard/login"
    async with dash.services.db.sessions() as session:
        row = await session.scalar(
            select(DashboardSession).where(DashboardSession.owner_key == owner.address.lower())
        )
    assert row is not None and row.revoked_at is not None
    # The old cookie, sent again, is refused.
    replay = httpx.AsyncClient(base_url=dash.base_url, cookies={"invoicing_session": cookie})
    async with replay:
        assert (await replay.get("/dashboard")).status_code == 303
        assert (await replay.post("/dashboard/logout", data={"csrf": csrf})).status_code == 401


async def test_a_login_link_signs_in_once(dash: RunningApp) -> None:
    owner = Account.create()
    token = await issue_link(dash.services.db, owner.address, int(time.time() * 1000), 60_000)
    fresh = httpx.AsyncClient(base_url=dash.base_url)
    async with fresh:
        first = await fresh.get(f"/dashboard/login/link/{token}")
        assert first.status_code == 200
        assert 'http-equiv="refresh"' in first.text
        assert (await fresh.get("/dashboard")).status_code == 200
    second = await dash.http.get(f"/dashboard/login/link/{token}")

    assert second.status_code == 401
    assert "set-cookie" not in second.headers
    assert await session_count(dash, owner.address) == 1


async def test_an_expired_login_link_is_refused(dash: RunningApp) -> None:
    owner = Account.create()
    token = await issue_link(dash.services.db, owner.address, int(time.time() * 1000) - 60_000, 1)

    answer = await dash.http.get(f"/dashboard/login/link/{token}")

    assert answer.status_code == 401
    assert await session_count(dash, owner.address) == 0


async def test_an_owner_the_service_does_not_admit_cannot_sign_in(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    admitted, stranger = new_owner(), new_owner()
    async with dashboard_app(make_services, owners=admitted.address) as app:
        refused = await sign_in(app.http, stranger, dev.chain_id)
        allowed = await sign_in(app.http, admitted, dev.chain_id)

        assert refused.status_code == 403
        assert allowed.status_code == 200
        assert await session_count(app, stranger.address) == 0


async def test_housekeeping_forgets_expired_tickets_and_keeps_live_ones(dash: RunningApp) -> None:
    now_ms = int(time.time() * 1000)
    owner = Account.create().address
    expired = await issue_link(dash.services.db, owner, now_ms - 120_000, 60_000)
    live = await issue_link(dash.services.db, owner, now_ms, 60_000)

    await purge_sign_in(dash.services.db, now_ms)

    async with dash.services.db.sessions() as session:
        kept = set(
            await session.scalars(
                select(SignInTicket.ticket_hash).where(
                    SignInTicket.ticket_hash.in_([sha256_hex(expired), sha256_hex(live)])
                )
            )
        )
    assert kept == {sha256_hex(live)}


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
