"""The one list of error codes (``invoicing.errors``) against its copies: the docs' table,
the codes the HTTP layer answers with, and both SDKs' error classes."""

from __future__ import annotations

import re
from pathlib import Path

from invoicing.errors import ErrorCode, ServiceError, error_catalog
from invoicing.settlement.relayer import RelayerUnavailable
from invoicing.web.errors import HTTP_CODES
from invoicing_client.errors import ERRORS_BY_CODE, ApiError
from tests.support.node import node_json

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (\d{3}) \| `([a-z_]+)` \| (.+?) \| .+ \|$")


def docs_table() -> list[ErrorCode]:
    text = (REPO / "docs/integration/errors.md").read_text()
    rows = [ROW.match(line) for line in text.splitlines()]
    return [ErrorCode(m[2], int(m[1]), m[3]) for m in rows if m]


def catalog_codes() -> dict[str, int]:
    return {error.code: error.status for error in error_catalog()}


def test_the_catalog_has_each_code_once_with_a_meaning() -> None:
    codes = [error.code for error in error_catalog()]
    assert len(codes) == len(set(codes)) == 38
    assert all(error.meaning and "\n" not in error.meaning for error in error_catalog())
    assert catalog_codes()["database_unavailable"] == 503


def test_errors_kept_elsewhere_reuse_a_catalog_code() -> None:
    pending: list[type[ServiceError]] = [ServiceError]
    subclasses = []
    while pending:
        cls = pending.pop()
        subclasses.append(cls)
        pending.extend(cls.__subclasses__())
    assert RelayerUnavailable in subclasses
    codes = catalog_codes()
    assert {cls.__name__: codes.get(cls.code) for cls in subclasses} == {
        cls.__name__: cls.status for cls in subclasses
    }


def test_the_docs_table_is_the_catalog_row_for_row() -> None:
    expected = sorted(error_catalog(), key=lambda error: error.status)
    assert docs_table() == expected


def test_every_code_the_http_layer_answers_is_in_the_catalog() -> None:
    # FastAPI's 422 (a body that fails validation) is answered as 400 invalid_request.
    answered = {code: 400 if status == 422 else status for status, code in HTTP_CODES.items()}
    codes = catalog_codes()
    assert {code: codes.get(code) for code in answered} == answered


def test_the_python_sdk_has_one_class_per_code_with_its_status() -> None:
    sdk = {code: cls.status for code, cls in ERRORS_BY_CODE.items() if cls is not ApiError}
    assert sdk == catalog_codes()


def test_the_js_sdk_has_one_class_per_code_with_its_status() -> None:
    script = (
        "const e = await import('./clients/js/src/errors.js');"
        "const codes = Object.fromEntries(Object.values(e)"
        ".filter((c) => typeof c === 'function' && c.prototype instanceof e.ApiError)"
        ".map((c) => [c.code, c.status]));"
        "const known = Object.fromEntries([...e.ERRORS_BY_CODE].map(([k, c]) => [k, c.status]));"
        "console.log(JSON.stringify({ codes, known }));"
    )
    answer = node_json(script)
    assert answer["codes"] == catalog_codes()
    assert answer["known"] == catalog_codes()
