"""The dashboard's static files: htmx is the npm package's file as locked (copied into the
Python package so the service serves it without node_modules), and no page needs an inline
script or style."""

from __future__ import annotations

import json
from pathlib import Path

from invoicing.web.dashboard.login import login_page_html
from invoicing.web.dashboard.render import CONTENT_SECURITY_POLICY, asset, page_html

ROOT = Path(__file__).resolve().parents[2]


def test_htmx_is_the_locked_npm_release() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/htmx.org"]["version"]
    package = json.loads((ROOT / "node_modules/htmx.org/package.json").read_text())
    shipped = (ROOT / "node_modules/htmx.org/dist/htmx.min.js").read_bytes()

    assert package["version"] == version
    assert asset("htmx.min.js") == shipped


def test_pages_have_no_inline_script_or_style() -> None:
    reports = page_html("reports.html", "T", owner="0xabc", csrf="t", months=["2026-01"])
    for html in (login_page_html(), reports):
        assert "<script>" not in html and " style=" not in html and "<style" not in html
        assert " on" + "click=" not in html
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
