"""Calling the API as an integrator would."""

from __future__ import annotations

from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from invoicing.auth.api_keys import create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.services import Services
from tests.support.signing import signed_headers


async def issue_api_key(services: Services, owner: LocalAccount) -> str:
    async with services.db.transaction() as session:
        _row, api_key = await create_api_key(
            session,
            owner.address,
            "test",
            ServerSecrets.of(services.settings),
            services.clock.now_ms(),
        )
    return api_key.get_secret_value()


def key_headers(api_key: str) -> dict[str, str]:
    return {"x-service-api-key": api_key}


async def signed_post(
    http: httpx.AsyncClient, path: str, owner: LocalAccount, action: str, body: dict[str, Any]
) -> httpx.Response:
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    return await http.post(path, json=body, headers=signed_headers(owner, action, payload))


async def signed_get(
    http: httpx.AsyncClient,
    path: str,
    owner: LocalAccount,
    action: str,
    params: dict[str, str],
    method: str = "GET",
) -> httpx.Response:
    payload = {k: v for k, v in params.items() if k != "ownerAddress"}
    return await http.request(
        method, path, params=params, headers=signed_headers(owner, action, payload)
    )
