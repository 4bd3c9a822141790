"""Admission control (``INVOICING_OWNERS``): only listed owners get any work done, whatever
credential a request carries; every other ownerAddress is 403 ``forbidden`` and nothing is
written. Over real HTTP, on anvil and the test database."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from pydantic import ValidationError
from sqlalchemy import func, select

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.auth import ApiKey, UsedRequestTimestamp
from invoicing.tables.invoices import Invoice
from invoicing.tables.ratelimit import RateLimitWindow
from invoicing.tables.settlement import RelayerTransaction
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get, signed_post
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import sign_typed

pytestmark = pytest.mark.integration

PATH = "/integration/invoices"


@asynccontextmanager
async def running(services: Services) -> AsyncIterator[RunningApp]:
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def written_for(services: Services, owner: LocalAccount) -> dict[str, int]:
    """Every row any route could have written for ``owner`` (a key issued before the owner
    list was set is counted as it was)."""
    key = owner.address.lower()
    counted = {
        "invoices": select(func.count()).select_from(Invoice).where(Invoice.owner_key == key),
        "api_keys": select(func.count()).select_from(ApiKey).where(ApiKey.owner_key == key),
        "timestamps": select(func.count())
        .select_from(UsedRequestTimestamp)
        .where(UsedRequestTimestamp.owner_key == key),
        "counters": select(func.count())
        .select_from(RateLimitWindow)
        .where(RateLimitWindow.key.like(f"%{key}")),
        "relayed": select(func.count()).select_from(RelayerTransaction),
    }
    async with services.db.sessions() as session:
        return {name: int(await session.scalar(query) or 0) for name, query in counted.items()}


def assert_forbidden(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    assert response.json() == {
        "error": {"code": "forbidden", "message": "ownerAddress is not an owner on this service"}
    }


async def every_route_family(
    app: RunningApp, stranger: LocalAccount, api_key: str, dev: DevDeployment
) -> list[httpx.Response]:
    owner = stranger.address
    body = {"ownerAddress": owner, "chainId": dev.chain_id, "amount": "1"}
    status_query = {"ownerAddress": owner, "paymentAddress": "0x" + "ab" * 20}
    deadline = int(time.time()) + 600
    typed = set_fee_typed_data(dev.chain_id, dev.factory, owner, 100, 0, deadline)
    fee_body = {
        "ownerAddress": owner,
        "chainId": dev.chain_id,
        "feeBps": 100,
        "nonce": "0",
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(stranger, typed).hex(),
    }
    http = app.http
    return [
        # an API key issued before the owner list was set
        await http.post(PATH, json=body, headers=key_headers(api_key)),
        await http.get(PATH, params={"ownerAddress": owner}, headers=key_headers(api_key)),
        await http.get(f"{PATH}/status", params=status_query, headers=key_headers(api_key)),
        await http.get(f"{PATH}/webhooks", params=status_query, headers=key_headers(api_key)),
        # signature mode, signed correctly by the stranger's wallet
        await signed_post(http, PATH, stranger, "invoice.create", body),
        await signed_post(
            http, "/integration/api-keys", stranger, "apikey.create", {"ownerAddress": owner}
        ),
        await signed_get(
            http, "/integration/api-keys", stranger, "apikey.list", {"ownerAddress": owner}
        ),
        await signed_get(
            http,
            "/integration/fees",
            stranger,
            "fee.get",
            {"ownerAddress": owner, "chainId": str(dev.chain_id)},
        ),
        await signed_post(http, "/integration/fees/set-meta", stranger, "fee.set-meta", fee_body),
        # the public fee route: the EIP-712 signature is valid, still nothing is relayed
        await http.post("/fees/set-meta", json=fee_body),
    ]


async def test_listed_owners_only_every_route_family_refuses_a_stranger_and_writes_nothing(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    admitted, stranger = new_owner(), new_owner()
    services = await make_services(owners=f" {admitted.address.lower()} ,{new_owner().address}")
    stranger_key = await issue_api_key(services, stranger)
    admitted_key = await issue_api_key(services, admitted)
    before = await written_for(services, stranger)

    async with running(services) as app:
        answers = await every_route_family(app, stranger, stranger_key, dev)
        allowed = await app.http.post(
            PATH,
            json={"ownerAddress": admitted.address, "chainId": dev.chain_id, "amount": "1"},
            headers=key_headers(admitted_key),
        )

    for answer in answers:
        assert_forbidden(answer)
    assert (
        await written_for(services, stranger)
        == before
        == {
            "invoices": 0,
            "api_keys": 1,
            "timestamps": 0,
            "counters": 0,
            "relayed": before["relayed"],
        }
    )
    assert allowed.status_code == 201


async def test_an_owners_file_is_read_again_when_it_changes(
    make_services: MakeServices, dev: DevDeployment, tmp_path: Path
) -> None:
    admitted, newcomer = new_owner(), new_owner()
    owners_file = tmp_path / "owners.txt"
    owners_file.write_text(f"# the shop\n{admitted.address}  # main wallet\n\n")
    services = await make_services(owners=f"file:{owners_file}")
    key = await issue_api_key(services, newcomer)

    def body(owner: LocalAccount) -> dict[str, Any]:
        return {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}

    async with running(services) as app:
        before = await app.http.post(PATH, json=body(newcomer), headers=key_headers(key))
        owners_file.write_text(f"{admitted.address}\n{newcomer.address.lower()}\n")
        later = time.time() + 5
        os.utime(owners_file, (later, later))
        after = await app.http.post(PATH, json=body(newcomer), headers=key_headers(key))
        owners_file.write_text("0xnot-an-address\n")  # a broken file admits nobody
        os.utime(owners_file, (later + 5, later + 5))
        broken = await app.http.post(PATH, json=body(newcomer), headers=key_headers(key))

    assert_forbidden(before)
    assert after.status_code == 201
    assert_forbidden(broken)


def test_a_bad_owner_list_stops_the_service_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="INVOICING_OWNERS: '0x1234' must be"):
        Settings(environment="development", owners=f"{new_owner().address},0x1234")
    with pytest.raises(ValidationError, match="No such file"):
        Settings(environment="development", owners=f"file:{tmp_path / 'missing.txt'}")
    assert Settings(environment="development").owners is None  # unset: open to any wallet
