"""Driving the dashboard as a browser would, without one: the app served on a port its own
``INVOICING_BASE_URL`` names (the SIWE domain), and sign-in with a wallet's key."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount

from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.server import free_port, serve


@contextlib.asynccontextmanager
async def dashboard_app(make_services: MakeServices, **overrides: Any) -> AsyncIterator[RunningApp]:
    port = free_port()
    # Every test signs in from 127.0.0.1 on one shared database (as the payment page's limit).
    overrides.setdefault("dashboard_sign_in_per_minute", 100_000)
    services = await make_services(base_url=f"http://127.0.0.1:{port}", **overrides)
    async with (
        serve(create_app(services), port=port) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def sign_in_message(http: httpx.AsyncClient, account: LocalAccount, chain_id: int) -> str:
    answer = await http.post(
        "/dashboard/login/message", json={"address": account.address, "chainId": chain_id}
    )
    assert answer.status_code == 200, answer.text
    message: str = answer.json()["message"]
    return message


def personal_sign(account: LocalAccount, message: str) -> str:
    return str(account.sign_message(encode_defunct(text=message)).signature.to_0x_hex())


async def sign_in(http: httpx.AsyncClient, account: LocalAccount, chain_id: int) -> httpx.Response:
    message = await sign_in_message(http, account, chain_id)
    return await http.post(
        "/dashboard/login", json={"message": message, "signature": personal_sign(account, message)}
    )


def csrf_of(page_html: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page_html)
    assert found, "the page carries no CSRF token"
    return found.group(1)
