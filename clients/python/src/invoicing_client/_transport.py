"""What the sync and async clients share: building a request, reading its answer, and when
to try again. Only the sending itself differs between them (``_async_client.py`` and the
``_sync_client.py`` generated from it)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from invoicing_client.errors import ApiError, ReplayedRequest, error_from_response
from invoicing_client.signing import API_KEY_HEADER, SIGNATURE_HEADER, RequestSigner

USER_AGENT = "invoicing-client-python/0.1.0"
# Answers worth another try of an idempotent call: the service or a proxy in front of it
# failed before answering, or the chain's RPC was unreachable for a live read.
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
# Actions the service takes only with the owner's request signature: API keys and the team
# (an admin member may issue API keys, and could otherwise reach the team through one).
SIGNATURE_ONLY = ("apikey.", "member.")


@dataclass(frozen=True)
class Call:
    """One API operation. ``query`` and ``body`` leave out ``ownerAddress`` (the client adds
    it first) and keep their order: signature mode signs them as sent. ``action`` is None for
    the public routes (sent without credentials)."""

    method: str
    path: str
    action: str | None
    query: Mapping[str, Any] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None
    # Safe to send twice (reads, delete, create with an invoiceId, a signed fee message):
    # retried after a lost connection or a 5xx.
    idempotent: bool = False
    # An id in the path, or in the query of a POST/PATCH: signed as the payload's first key.
    signed_id: str | None = None
    # Error statuses whose body is still the answer (503 from /readyz).
    accept: frozenset[int] = frozenset()
    # A payer's body (a public route's), which names no owner: sent without ownerAddress.
    ownerless: bool = False


@dataclass(frozen=True)
class Reply:
    status: int
    data: Any
    signature: str | None  # the x-service-signature sent, in signature mode
    text: str = ""  # the body as text (the escrow export's NDJSON, the payment page's HTML)


# httpx's type of query items (list is invariant: a list[tuple[str, str]] is not one).
QueryItems = list[tuple[str, str | int | float | bool | None]]


@dataclass(frozen=True)
class Prepared:
    method: str
    url: str
    params: QueryItems
    content: bytes | None
    headers: dict[str, str]


def query_value(value: Any) -> str:
    """A query parameter as sent (and signed): booleans as true/false, integers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    raise TypeError(f"query values must be str, int or bool, not {type(value).__name__}")


class Transport:
    """Credentials, retry policy, and the request/answer rules of the service."""

    def __init__(
        self,
        base_url: str,
        owner_address: str,
        api_key: str | None,
        private_key: str | None,
        max_retries: int,
        backoff_s: float,
    ) -> None:
        if api_key is None and private_key is None:
            raise ValueError("give api_key= or private_key= (signature mode)")
        self.base_url = base_url.rstrip("/")
        self.owner_address = owner_address
        self._api_key = api_key
        self.signer = RequestSigner(private_key, owner_address) if private_key else None
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    def __repr__(self) -> str:  # never a credential
        mode = "api_key" if self._api_key else "signature"
        return f"Transport({self.base_url!r}, owner_address={self.owner_address!r}, {mode})"

    def prepare(self, call: Call) -> Prepared:
        """The request of one attempt: a fresh timestamp and signature each time."""
        params: QueryItems = [(key, query_value(value)) for key, value in call.query.items()]
        headers = {"accept": "application/json", "user-agent": USER_AGENT}
        content = None
        if call.body is not None:
            owner = {} if call.ownerless else {"ownerAddress": self.owner_address}
            content = json.dumps({**owner, **call.body}, separators=(",", ":")).encode()
            headers["content-type"] = "application/json"
            payload: dict[str, Any] = dict(call.body)
        else:
            payload = dict(params)
            if call.action is not None:
                params.insert(0, ("ownerAddress", self.owner_address))
        if call.signed_id is not None:
            payload = {"id": call.signed_id, **payload}
        if call.action is not None:
            headers.update(self._credentials(call.action, payload))
        return Prepared(call.method, self.base_url + call.path, params, content, headers)

    def _credentials(self, action: str, payload: dict[str, Any]) -> dict[str, str]:
        # API key first: API keys and the team are managed in signature mode only, so a
        # client given both signs where it must (the service answers 401 otherwise).
        if self._api_key is not None and not action.startswith(SIGNATURE_ONLY):
            return {API_KEY_HEADER: self._api_key}
        if self.signer is not None:
            return self.signer.headers(action, payload)
        assert self._api_key is not None  # one of the two is given (__init__)
        return {API_KEY_HEADER: self._api_key}

    def reply(self, call: Call, response: httpx.Response, prepared: Prepared) -> Reply:
        """The answer's JSON, or the exception of its error code."""
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_success or response.status_code in call.accept:
            signature = prepared.headers.get(SIGNATURE_HEADER)
            return Reply(response.status_code, data, signature, response.text)
        raise error_from_response(response.status_code, data)

    def retry_delay(self, call: Call, attempt: int, error: Exception) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to give up with ``error``."""
        if attempt > self.max_retries:
            return None
        if isinstance(error, ReplayedRequest):
            # Another client of this owner used the same millisecond: nothing was done.
            return 0.0 if attempt == 1 else None
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
            pass  # nothing reached the service: safe for any call
        elif not call.idempotent:
            return None
        elif isinstance(error, ApiError) and error.status not in RETRYABLE_STATUSES:
            return None
        delay = min(self.backoff_s * 2.0 ** (attempt - 1), 8.0)
        return float(delay * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not a secret
