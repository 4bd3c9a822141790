"""Refund claim links over real HTTP on anvil: the owner makes a link, the payer names their
own address on the public page, the owner's signed refund pays exactly that address and fixes
it; unknown, expired and revoked links get the 404 page, bad addresses the form's error, and
nobody changes the address once the owner approved it."""

from __future__ import annotations

import html

import httpx
import pytest
from sqlalchemy import update

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.evm import EvmClient
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.refunds import RefundClaim
from tests.conftest import MakeServices
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.refund_claims import claim, claim_row, make_link
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    new_invoice,
    paid_invoice,
    relayer_of,
    reload,
    settle_all,
    sign_typed,
)

pytestmark = pytest.mark.integration

ANY_TOKEN = "A" * 43
FUNDER_KEY = DEV_PRIVATE_KEYS[8]


@pytest.fixture
def database_url(own_database: str) -> str:
    """A database per test: the pay pages' limit counts each client address in the database,
    and other files' tests on the run's shared database call them from the same address."""
    return own_database


async def expire(services: Services, invoice_id: str) -> None:
    async with services.db.transaction() as session:
        await session.execute(
            update(RefundClaim)
            .where(RefundClaim.invoice_id == invoice_id)
            .values(expires_at=services.clock.now_ms())
        )


async def test_the_payer_names_an_address_and_the_owners_signed_refund_pays_it(
    make_services: MakeServices, evm: EvmClient
) -> None:
    owner, first, chosen, stranger = (new_owner() for _ in range(4))
    async with (
        dashboard_app(make_services) as app,
        httpx.AsyncClient(base_url=app.base_url, timeout=30) as payer,
    ):
        services = app.services
        invoice = await paid_invoice(services, evm, owner.address, "0.01")
        assert (await sign_in(app.http, owner, invoice.chain_id)).status_code == 200
        csrf = csrf_of((await app.http.get(f"/dashboard/invoices/{invoice.id}")).text)
        made, token = await make_link(app.http, csrf, invoice.id)
        assert f"{services.settings.payment_page_url}/refund-claim/{token}" in made
        shown_again = (await app.http.get(f"/dashboard/invoices/{invoice.id}")).text
        assert token not in shown_again and "No address claimed yet." in shown_again

        opened = await payer.get(f"/refund-claim/{token}?lang=en")
        assert opened.status_code == 200
        assert 'id="claim-form"' in opened.text and invoice.invoice_id in opened.text
        assert "form-action 'self'" in opened.headers["content-security-policy"]

        bad_checksum = first.address[:2] + first.address[2:].swapcase()
        if bad_checksum[2:] in (bad_checksum[2:].lower(), bad_checksum[2:].upper()):
            bad_checksum = "0x" + "g" * 40
        refused = await claim(payer, token, bad_checksum)
        assert refused.status_code == 400
        assert 'id="claim-error"' in refused.text and 'aria-invalid="true"' in refused.text
        assert (await claim_row(services, invoice.id)).address is None  # type: ignore[union-attr]

        assert (await claim(payer, token, first.address.lower())).status_code == 200
        saved = await claim(payer, token, "  " + chosen.address + " ")
        assert saved.status_code == 200
        assert "Saved: the merchant will now review" in html.unescape(saved.text)
        row = await claim_row(services, invoice.id)
        assert row is not None and (row.address, row.approved_at) == (chosen.address, None)

        page = (await app.http.get(f"/dashboard/invoices/{invoice.id}")).text
        assert f'id="claimed-address">{chosen.address}<' in page
        assert f'name="to" required autocomplete="off" size="44" value="{chosen.address}"' in page

        assert await balance_of(evm, chosen.address) == 0
        headers = {"x-csrf-token": csrf}
        prepared = await app.http.post(
            f"/dashboard/invoices/{invoice.id}/refund/prepare",
            json={"to": chosen.address, "amount": "0.004"},
            headers=headers,
        )
        assert prepared.status_code == 200, prepared.text
        body = prepared.json()
        signature = "0x" + sign_typed(owner, body["typedData"]).hex()
        sent = await app.http.post(
            f"/dashboard/invoices/{invoice.id}/refund",
            json={**body["submit"], "signature": signature},
            headers=headers,
        )
        assert sent.status_code == 202, sent.text
        await settle_all(services)
        assert await balance_of(evm, chosen.address) == 4 * 10**15  # a new account: exactly

        late = await claim(payer, token, stranger.address)
        state = await payer.get(f"/refund-claim/{token}")

    assert late.status_code == 409
    assert "The merchant approved the refund to" in html.unescape(late.text)
    assert 'id="claim-form"' not in state.text and chosen.address in state.text
    row = await claim_row(services, invoice.id)
    assert row is not None and row.address == chosen.address and row.approved_at is not None


async def test_unknown_expired_revoked_links_and_bad_addresses_are_refused(
    make_services: MakeServices, evm: EvmClient
) -> None:
    owner, other, payer = new_owner(), new_owner(), new_owner()
    async with dashboard_app(make_services) as app:
        services, http = app.services, app.http
        invoice = await paid_invoice(services, evm, owner.address, "0.01")
        pending = await new_invoice(services, owner.address, "0.01")
        foreign = await paid_invoice(services, evm, other.address, "0.01")
        assert (await sign_in(http, owner, invoice.chain_id)).status_code == 200
        csrf = csrf_of((await http.get(f"/dashboard/invoices/{invoice.id}")).text)

        too_early = await http.post(
            f"/dashboard/invoices/{pending.id}/refund-claim", data={"csrf": csrf}
        )
        not_mine = await http.post(
            f"/dashboard/invoices/{foreign.id}/refund-claim", data={"csrf": csrf}
        )
        unknown = [
            await http.get(f"/refund-claim/{ANY_TOKEN}"),
            await http.get("/refund-claim/short"),
            await claim(http, ANY_TOKEN, payer.address),
        ]
        _page, token = await make_link(http, csrf, invoice.id)
        bad = [
            await claim(http, token, text)
            for text in ("", "0x123", "0x" + "0" * 40, payer.address[:-1] + "z", "x" * 5000)
        ]
        assert await claim_row(services, invoice.id) is not None
        _page, newer = await make_link(http, csrf, invoice.id)
        replaced = await http.get(f"/refund-claim/{token}")
        await expire(services, invoice.id)
        expired = [
            await http.get(f"/refund-claim/{newer}"),
            await claim(http, newer, payer.address),
        ]
        _page, third = await make_link(http, csrf, invoice.id)
        revoke = await http.post(
            f"/dashboard/invoices/{invoice.id}/refund-claim/revoke", data={"csrf": csrf}
        )
        revoked = await http.get(f"/refund-claim/{third}")
        row = await claim_row(services, invoice.id)

    assert too_early.status_code == 409
    assert not_mine.status_code == 404
    assert [r.status_code for r in unknown] == [404, 404, 404]
    assert "This refund link is unknown, expired or revoked." in unknown[0].text
    assert [r.status_code for r in bad] == [400, 400, 400, 400, 400]
    assert all('id="claim-error"' in r.text for r in bad)
    assert replaced.status_code == 404
    assert [r.status_code for r in expired] == [404, 404]
    assert (revoke.status_code, revoked.status_code) == (303, 404)
    assert row is None


async def test_the_claim_page_counts_against_the_payment_page_limit(
    make_services: MakeServices,
) -> None:
    async with dashboard_app(make_services, pay_rate_limit_per_minute=2) as app:
        answers = [(await app.http.get(f"/refund-claim/{ANY_TOKEN}")).status_code for _ in range(3)]
    assert answers == [404, 404, 429]


async def test_after_the_sweep_the_wallet_refund_goes_to_the_claimed_address(
    make_services: MakeServices, evm: EvmClient
) -> None:
    owner, chosen, stranger = new_owner(), new_owner(), new_owner()
    await evm.transact(FUNDER_KEY, owner.address, value=10**18)
    async with dashboard_app(make_services) as app:
        services, http = app.services, app.http
        invoice = await paid_invoice(services, evm, owner.address, "0.01")
        await plan_withdrawals(
            services,
            gateway(services),
            relayer_of(services),
            full=True,
            owner_key=owner.address.lower(),
        )
        await settle_all(services)
        assert (await reload(services, invoice.id)).status == "completed"
        assert (await sign_in(http, owner, invoice.chain_id)).status_code == 200
        csrf = csrf_of((await http.get(f"/dashboard/invoices/{invoice.id}")).text)
        _page, token = await make_link(http, csrf, invoice.id)
        assert (await claim(http, token, chosen.address)).status_code == 200
        page = (await http.get(f"/dashboard/invoices/{invoice.id}")).text
        assert "Send the refund from my wallet" in page
        assert f'name="to" required autocomplete="off" size="44" value="{chosen.address}"' in page

        sent = await evm.transact(owner.key.to_0x_hex(), chosen.address, value=3 * 10**15)
        body = {
            "txHash": str(sent["transactionHash"]),
            "to": chosen.address,
            "amountRaw": str(3 * 10**15),
        }
        recorded = await http.post(
            f"/dashboard/invoices/{invoice.id}/wallet-refund",
            json=body,
            headers={"x-csrf-token": csrf},
        )
        assert recorded.status_code == 201, recorded.text
        late = await claim(http, token, stranger.address)

    assert late.status_code == 409
    assert await balance_of(evm, chosen.address) == 3 * 10**15
    row = await claim_row(services, invoice.id)
    assert row is not None and row.address == chosen.address and row.approved_at is not None
