"""Client-side helpers: owner wallets and signature-mode headers."""

from __future__ import annotations

import time
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.auth.signatures import sign_request

_last_ms = 0


def new_owner() -> LocalAccount:
    account: LocalAccount = Account.create()
    return account


def unique_now_ms() -> int:
    """Current ms, strictly increasing within the test run (one timestamp, one request)."""
    global _last_ms
    _last_ms = max(_last_ms + 1, time.time_ns() // 1_000_000)
    return _last_ms


def signed_headers(
    account: LocalAccount,
    action: str,
    payload: dict[str, Any],
    timestamp_ms: int | None = None,
    owner_address: str | None = None,
) -> dict[str, str]:
    ts = timestamp_ms if timestamp_ms is not None else unique_now_ms()
    signature = sign_request(
        account.key.to_0x_hex(), action, owner_address or account.address, ts, payload
    )
    return {"x-service-signature": signature, "x-service-timestamp": str(ts)}
