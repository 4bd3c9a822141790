"""Every response carries ``x-request-id`` (the request's own when sane), and the lines
logged while serving a request carry it too, as JSON with INVOICING_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi import Request

from invoicing.logs import JsonFormatter
from invoicing.web.api.deps import authorize
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

GENERATED = re.compile(r"[0-9a-f]{32}")


class Lines(logging.Handler):
    """The JSON lines logged while it is attached to the root logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def json_lines() -> Iterator[Lines]:
    handler = Lines()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


async def test_a_sane_request_id_is_echoed(app: RunningApp) -> None:
    sent = "req-2026.11:23_A"
    response = await app.http.get("/healthz", headers={"x-request-id": sent})

    assert response.headers["x-request-id"] == sent


@pytest.mark.parametrize(
    "sent",
    ["x" * 129, "has space", "semi;colon", "ünïcode", ""],
    ids=["too-long", "space", "semicolon", "non-ascii", "empty"],
)
async def test_a_request_id_that_is_not_sane_is_replaced(app: RunningApp, sent: str) -> None:
    response = await app.http.get(
        "/healthz", headers=[(b"x-request-id", sent.encode())] if sent else [(b"x-request-id", b"")]
    )

    assert response.status_code == 200
    assert GENERATED.fullmatch(response.headers["x-request-id"])


async def test_error_answers_carry_a_new_request_id_each(app: RunningApp) -> None:
    unmatched = await app.http.get("/no/such/route")
    unauthorized = await app.http.get(
        "/integration/invoices", params={"ownerAddress": new_owner().address}
    )
    too_large = await app.http.post(
        "/integration/invoices",
        content=b"{" + b" " * (65 * 1024) + b"}",
        headers={"content-type": "application/json", "x-service-api-key": "k"},
    )

    statuses = [r.status_code for r in (unmatched, unauthorized, too_large)]
    ids = {r.headers["x-request-id"] for r in (unmatched, unauthorized, too_large)}
    assert statuses == [404, 401, 413]
    assert len(ids) == 3 and all(GENERATED.fullmatch(i) for i in ids)


async def test_an_unhandled_error_answers_500_with_the_request_id_and_logs_it(
    make_services: MakeServices, json_lines: Lines
) -> None:
    services = await make_services()
    owner = new_owner()
    key = await issue_api_key(services, owner)
    app = create_app(services)

    @app.get("/boom")
    async def boom(request: Request) -> None:
        # A handler that fails after authenticating its owner, as a bug would.
        await authorize(request, "invoice.list", owner.address, {}, query_types={})
        raise RuntimeError("a bug")

    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        response = await http.get("/boom", headers=key_headers(key) | {"x-request-id": "t-500"})

    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal_error", "message": "internal error"}}
    assert response.headers["x-request-id"] == "t-500"
    (line,) = [line for line in json_lines.lines if line["event"] == "unhandled error"]
    assert line["level"] == "ERROR" and line["logger"] == "invoicing.web.observability"
    assert (line["request_id"], line["owner"]) == ("t-500", owner.address)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(line["time"]))
    assert "RuntimeError: a bug" in str(line["exc"])
    assert key not in json.dumps(json_lines.lines)
