"""The schemathesis side of tests/acceptance/test_schemathesis.py, run as its own process
(so that generating cases and serving them do not share one interpreter's lock):

    python -m tests.support.schemathesis_run BASE_URL OWNER_KEY API_KEY CHAIN_ID PAYMENT_ADDRESS \
        SHARD SHARDS

Every operation of openapi.json, valid and invalid cases by the schema; each case of an
operation with security requirements is sent twice, with the owner's API key and signed by
the owner wallet (over the operation's ``x-signature-action``). Runs the operations whose
index is SHARD modulo SHARDS (several processes share the work). Prints one JSON line:
statuses, auth modes, failures, seconds.

The generated ``ownerAddress`` is replaced by the real owner's in most cases, and
``chainId``/``paymentAddress`` by real ones in some, so requests get past authentication
and lookups to the routes' own work. A requests ``Session`` signs each request exactly as
it goes on the wire (the query string as sent, the body bytes as sent); the credentials
schemathesis generates from the security schemes are dropped.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import hypothesis
import requests
import schemathesis
from eth_account import Account
from eth_account.signers.local import LocalAccount
from hypothesis import HealthCheck, Phase, given
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.auth.signatures import sign_request
from tests.support.api import key_headers
from tests.support.openapi_check import OPENAPI

# Cases per operation and generation mode (positive, then negative where the operation has
# a query or body to break); ``SCHEMATHESIS_EXAMPLES`` overrides it.
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "20"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


class SigningSession(requests.Session):
    """Adds the credential of ``mode`` to each request as it is sent: the owner's API key,
    or the owner wallet's signature over the query or body exactly as on the wire."""

    def __init__(self, owner: LocalAccount, api_key: str, shard: int, shards: int) -> None:
        super().__init__()
        self.owner, self.api_key, self.mode = owner, api_key, "apiKey"
        self.action: str | None = None  # the operation's x-signature-action
        self.shard, self.shards, self.last_ms = shard, shards, 0

    def timestamp(self) -> int:
        """Increasing, and never one another shard's process uses (a timestamp is accepted
        once per owner)."""
        now = max(time.time_ns() // 1_000_000, self.last_ms + 1)
        now += (self.shard - now) % self.shards
        self.last_ms = now
        return now

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        for name in (API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER):  # generated ones
            request.headers.pop(name, None)
        if self.mode == "apiKey":
            request.headers.update(key_headers(self.api_key))
        elif self.mode == "signature" and self.action is not None:
            query = urlsplit(request.url or "").query
            request.headers.update(self._signature(self.action, query, request.body))
        return super().send(request, **kwargs)

    def _signature(self, action: str, query: str, body: Any) -> dict[str, str]:
        if body is None:
            data: Any = dict(parse_qsl(query, keep_blank_values=True))
        else:
            try:
                data = json.loads(body)
            except ValueError:
                return {}
        if not isinstance(data, dict) or not isinstance(data.get("ownerAddress"), str):
            return {}
        payload = {key: value for key, value in data.items() if key != "ownerAddress"}
        timestamp = self.timestamp()
        signature = sign_request(
            self.owner.key.to_0x_hex(), action, data["ownerAddress"], timestamp, payload
        )
        return {SIGNATURE_HEADER: signature, TIMESTAMP_HEADER: str(timestamp)}


@dataclass
class Run:
    base_url: str
    session: SigningSession
    chain_id: int
    payment_address: str
    rng: random.Random = field(default_factory=lambda: random.Random(16))
    statuses: Counter[int] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def aim(self, case: schemathesis.Case) -> None:
        """Point most cases at the real owner, some at a real chain and invoice."""
        owner = self.session.owner.address
        for container in (case.query, case.body, case.path_parameters):
            if not isinstance(container, dict):
                continue
            if "ownerAddress" in container and self.rng.random() < 0.8:
                container["ownerAddress"] = owner
            if "chainId" in container and self.rng.random() < 0.5:
                container["chainId"] = self.chain_id
            for name in ("paymentAddress", "payment_address"):
                if name in container and self.rng.random() < 0.5:
                    container[name] = self.payment_address

    def send(self, case: schemathesis.Case) -> None:
        self.aim(case)
        self.session.action = case.operation.definition.raw.get("x-signature-action")
        authenticated = bool(case.operation.definition.raw.get("security"))
        for mode in ("apiKey", "signature") if authenticated else ("public",):
            self.session.mode = mode
            self.modes[mode] += 1
            response = case.call(base_url=self.base_url, session=self.session)
            self.statuses[response.status_code] += 1
            try:
                case.validate_response(response, checks=CHECKS)
            except AssertionError as exc:  # the failed checks, with a curl line to reproduce
                self.failures.append(f"[{mode}] {str(exc)[:2000]}")


def _has_input(operation: schemathesis.APIOperation) -> bool:
    """A query or body that negative cases can break (a path parameter alone cannot be
    invalid: every string is one)."""
    return any(True for _ in operation.query) or any(True for _ in operation.body)


def drive(run: Run, shard: int, shards: int) -> None:
    schema = schemathesis.openapi.from_path(OPENAPI)
    for index, result in enumerate(schema.get_all_operations()):
        if index % shards != shard:
            continue
        operation = result.ok()
        modes = [schemathesis.GenerationMode.POSITIVE]
        if _has_input(operation):
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        for mode in modes:

            @hypothesis.settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def send(case: schemathesis.Case) -> None:
                run.send(case)

            send()


def main() -> None:
    base_url, owner_key, api_key, chain_id, payment_address, shard, shards = sys.argv[1:8]
    session = SigningSession(Account.from_key(owner_key), api_key, int(shard), int(shards))
    run = Run(base_url, session, int(chain_id), payment_address)
    started, cpu_started = time.monotonic(), time.process_time()
    drive(run, int(shard), int(shards))
    summary = {
        "statuses": {str(status): count for status, count in sorted(run.statuses.items())},
        "modes": dict(run.modes),
        "failures": run.failures,
        "seconds": round(time.monotonic() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
    }
    sys.stdout.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
