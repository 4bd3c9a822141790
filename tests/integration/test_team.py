"""A team: members added by the owner's signature sign in to the owner's account with their
own wallets and act within their role; every refusal leaves everything as it was."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.deploy import DevDeployment
from invoicing.notifications.mail.choices import NOTHING, mail_choices
from invoicing.tables.auth import ApiKey, DashboardSession, TeamMember
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventEndpoint
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get, signed_post
from tests.support.dashboard import csrf_of, dashboard_app, personal_sign, sign_in
from tests.support.signing import new_owner, signed_headers

MEMBERS = "/integration/members"


@pytest.fixture
async def dash(make_services: MakeServices) -> Any:
    async with dashboard_app(make_services) as app:
        yield app


async def add(app: RunningApp, owner: LocalAccount, member: str, role: str) -> httpx.Response:
    body = {"ownerAddress": owner.address, "address": member, "role": role}
    return await signed_post(app.http, MEMBERS, owner, "member.add", body)


async def members_of(app: RunningApp, owner: LocalAccount) -> list[tuple[str, str]]:
    async with app.services.db.sessions() as session:
        rows = await session.scalars(
            select(TeamMember).where(TeamMember.owner_key == owner.address.lower())
        )
        return sorted((row.member_address, row.role) for row in rows)


async def count(app: RunningApp, model: Any, owner: LocalAccount) -> int:
    async with app.services.db.sessions() as session:
        found = await session.scalar(
            select(func.count()).select_from(model).where(model.owner_key == owner.address.lower())
        )
        return int(found or 0)


async def member_sign_in(
    http: httpx.AsyncClient,
    member: LocalAccount,
    account: str,
    chain_id: int,
    sent_account: str | None = None,
) -> httpx.Response:
    """Sign the message for ``account``; send it as for ``sent_account`` (default: the same)."""
    asked = await http.post(
        "/dashboard/login/message",
        json={"address": member.address, "chainId": chain_id, "account": account},
    )
    assert asked.status_code == 200, asked.text
    message = asked.json()["message"]
    body = {
        "message": message,
        "signature": personal_sign(member, message),
        "account": sent_account or account,
    }
    return await http.post("/dashboard/login", json=body)


@contextlib.asynccontextmanager
async def member_client(
    app: RunningApp, member: LocalAccount, owner: LocalAccount, chain_id: int
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
        signed = await member_sign_in(client, member, owner.address, chain_id)
        assert signed.status_code == 200, signed.text
        yield client, csrf_of((await client.get("/dashboard")).text)


def new_invoice_form(csrf: str, dev: DevDeployment, invoice_id: str) -> dict[str, str]:
    return {
        "csrf": csrf,
        "asset": f"{dev.chain_id}:{dev.token}",
        "amount": "1",
        "invoiceId": invoice_id,
        "expiresInMinutes": "60",
    }


# ---- the API -----------------------------------------------------------------------------


async def test_the_owner_manages_the_team_by_signature(dash: RunningApp) -> None:
    owner, viewer, admin = new_owner(), new_owner(), new_owner()

    first = await add(dash, owner, viewer.address, "viewer")
    await add(dash, owner, admin.address, "operator")
    changed = await add(dash, owner, admin.address, "admin")
    listed = await signed_get(
        dash.http, MEMBERS, owner, "member.list", {"ownerAddress": owner.address}
    )
    removed = await signed_get(
        dash.http,
        MEMBERS,
        owner,
        "member.remove",
        {"ownerAddress": owner.address, "address": viewer.address},
        method="DELETE",
    )

    assert first.status_code == 201, first.text
    assert first.json()["address"] == viewer.address and first.json()["role"] == "viewer"
    assert changed.json()["role"] == "admin"
    assert [(m["address"], m["role"]) for m in listed.json()["items"]] == [
        (viewer.address, "viewer"),
        (admin.address, "admin"),
    ]
    assert removed.json() == {"removed": True, "address": viewer.address}
    assert await members_of(dash, owner) == [(admin.address, "admin")]


async def test_an_api_key_cannot_manage_the_team(dash: RunningApp) -> None:
    owner, member = new_owner(), new_owner()
    headers = key_headers(await issue_api_key(dash.services, owner))
    body = {"ownerAddress": owner.address, "address": member.address, "role": "admin"}

    answer = await dash.http.post(MEMBERS, json=body, headers=headers)
    listed = await dash.http.get(MEMBERS, params={"ownerAddress": owner.address}, headers=headers)

    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    assert listed.status_code == 401
    assert await members_of(dash, owner) == []


@pytest.mark.parametrize(
    "change",
    [{"role": "owner"}, {"role": "ADMIN"}, {"address": "0x1234"}, {"extra": 1}],
)
async def test_bad_members_are_400_and_change_nothing(
    dash: RunningApp, change: dict[str, Any]
) -> None:
    owner, member = new_owner(), new_owner()
    body = {"ownerAddress": owner.address, "address": member.address, "role": "viewer", **change}

    answer = await dash.http.post(
        MEMBERS,
        json=body,
        headers=signed_headers(
            owner, "member.add", {k: v for k, v in body.items() if k != "ownerAddress"}
        ),
    )

    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"
    assert await members_of(dash, owner) == []


async def test_the_owner_is_not_their_own_member(dash: RunningApp) -> None:
    owner = new_owner()

    answer = await add(dash, owner, owner.address, "admin")

    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"
    assert await members_of(dash, owner) == []


# ---- the dashboard -----------------------------------------------------------------------


async def test_a_viewer_reads_and_changes_nothing(dash: RunningApp, dev: DevDeployment) -> None:
    owner, viewer = new_owner(), new_owner()
    await add(dash, owner, viewer.address, "viewer")

    async with member_client(dash, viewer, owner, dev.chain_id) as (client, csrf):
        listed = await client.get("/dashboard/invoices")
        created = await client.post(
            "/dashboard/invoices/new", data=new_invoice_form(csrf, dev, "by-viewer")
        )
        hooked = await client.post(
            "/dashboard/webhooks/endpoints", data={"csrf": csrf, "url": "http://127.0.0.1:9/v"}
        )
        keyed = await client.post("/dashboard/api-keys", data={"csrf": csrf, "label": "v"})
        mailed = await client.post(
            "/dashboard/email", data={"csrf": csrf, "email": "v@shop.example"}
        )
        team = await client.get("/dashboard/team")
        out = await client.post("/dashboard/logout", data={"csrf": csrf})

    assert listed.status_code == 200 and owner.address in listed.text
    for refused in (created, hooked, keyed, mailed, team):
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
    assert out.status_code == 303
    assert await count(dash, Invoice, owner) == 0
    assert await count(dash, EventEndpoint, owner) == 0
    assert await count(dash, ApiKey, owner) == 0
    async with dash.services.db.sessions() as session:
        assert await mail_choices(session, owner.address.lower()) == NOTHING


async def test_an_operator_creates_invoices_but_cannot_manage_keys_or_the_team(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner, operator, stranger = new_owner(), new_owner(), new_owner()
    await add(dash, owner, operator.address, "operator")

    async with member_client(dash, operator, owner, dev.chain_id) as (client, csrf):
        created = await client.post(
            "/dashboard/invoices/new", data=new_invoice_form(csrf, dev, "by-operator")
        )
        hooked = await client.post(
            "/dashboard/webhooks/endpoints", data={"csrf": csrf, "url": "http://127.0.0.1:9/o"}
        )
        keyed = await client.post("/dashboard/api-keys", data={"csrf": csrf, "label": "o"})
        teamed = await client.post(
            "/dashboard/team", data={"csrf": csrf, "address": stranger.address, "role": "admin"}
        )
        upgraded = await client.post(
            "/dashboard/team", data={"csrf": csrf, "address": operator.address, "role": "admin"}
        )

    assert created.status_code == 201, created.text
    async with dash.services.db.sessions() as session:
        invoice = await session.scalar(
            select(Invoice).where(Invoice.owner_key == owner.address.lower())
        )
    assert invoice is not None and invoice.invoice_id == "by-operator"
    assert hooked.status_code in (201, 303), hooked.text
    assert await count(dash, EventEndpoint, owner) == 1
    for refused in (keyed, teamed, upgraded):
        assert refused.status_code == 403, refused.text
    assert await count(dash, ApiKey, owner) == 0
    assert await members_of(dash, owner) == [(operator.address, "operator")]


async def test_an_admin_manages_keys_but_not_the_team(dash: RunningApp, dev: DevDeployment) -> None:
    owner, admin, stranger = new_owner(), new_owner(), new_owner()
    await add(dash, owner, admin.address, "admin")

    async with member_client(dash, admin, owner, dev.chain_id) as (client, csrf):
        keyed = await client.post("/dashboard/api-keys", data={"csrf": csrf, "label": "a"})
        teamed = await client.post(
            "/dashboard/team", data={"csrf": csrf, "address": stranger.address, "role": "viewer"}
        )
        sessions = await client.post(
            "/dashboard/settings/sessions/anything/revoke", data={"csrf": csrf}
        )

    assert keyed.status_code == 201, keyed.text
    assert await count(dash, ApiKey, owner) == 1
    assert teamed.status_code == 403 and sessions.status_code == 403
    assert await members_of(dash, owner) == [(admin.address, "admin")]


async def test_only_members_sign_in_to_an_account_and_only_the_one_signed_for(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner, other_owner, member, stranger = new_owner(), new_owner(), new_owner(), new_owner()
    await add(dash, owner, member.address, "viewer")
    await add(dash, other_owner, member.address, "admin")

    async with httpx.AsyncClient(base_url=dash.base_url, timeout=30) as client:
        not_member = await member_sign_in(client, stranger, owner.address, dev.chain_id)
        # A message signed for one account does not open another.
        switched = await member_sign_in(
            client, member, owner.address, dev.chain_id, sent_account=other_owner.address
        )

    assert not_member.status_code == 403
    assert switched.status_code == 401
    assert await count(dash, DashboardSession, owner) == 0
    assert await count(dash, DashboardSession, other_owner) == 0


async def test_a_removed_member_is_signed_out_at_once(dash: RunningApp, dev: DevDeployment) -> None:
    owner, member = new_owner(), new_owner()
    await add(dash, owner, member.address, "operator")

    async with member_client(dash, member, owner, dev.chain_id) as (client, csrf):
        before = await client.get("/dashboard/invoices")
        await signed_get(
            dash.http,
            MEMBERS,
            owner,
            "member.remove",
            {"ownerAddress": owner.address, "address": member.address},
            method="DELETE",
        )
        after = await client.get("/dashboard/invoices")
        create = await client.post(
            "/dashboard/invoices/new", data=new_invoice_form(csrf, dev, "too-late")
        )

    assert before.status_code == 200
    assert after.status_code == 303 and after.headers["location"] == "/dashboard/login"
    assert create.status_code == 401
    assert await count(dash, Invoice, owner) == 0


async def test_the_owner_signs_in_as_before(dash: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    async with httpx.AsyncClient(base_url=dash.base_url, timeout=30) as client:
        signed = await sign_in(client, owner, dev.chain_id)
        team = await client.get("/dashboard/team")

    assert signed.status_code == 200
    assert team.status_code == 200 and 'id="member-form"' in team.text


async def test_the_owner_sees_and_ends_a_members_session(
    dash: RunningApp, dev: DevDeployment
) -> None:
    owner, member = new_owner(), new_owner()
    await add(dash, owner, member.address, "admin")

    async with (
        member_client(dash, member, owner, dev.chain_id) as (member_http, _member_csrf),
        httpx.AsyncClient(base_url=dash.base_url, timeout=30) as owner_http,
    ):
        assert (await sign_in(owner_http, owner, dev.chain_id)).status_code == 200
        owner_csrf = csrf_of((await owner_http.get("/dashboard")).text)
        listed = await owner_http.get("/dashboard/settings")
        async with dash.services.db.sessions() as session:
            theirs = await session.scalar(
                select(DashboardSession).where(
                    DashboardSession.member_key == member.address.lower()
                )
            )
        assert theirs is not None
        ended = await owner_http.post(
            f"/dashboard/settings/sessions/{theirs.id}/revoke", data={"csrf": owner_csrf}
        )
        after = await member_http.get("/dashboard/invoices")

    assert f"siwe, member {member.address.lower()}" in listed.text
    assert ended.status_code == 303
    assert after.status_code == 303 and after.headers["location"] == "/dashboard/login"
