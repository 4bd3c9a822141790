"""The Medusa v2 payment provider (`integrations/medusa`): its Node test-runner suite, the
TypeScript compiled by that folder's own tsc, against a real `invoicing dev`: the provider
called directly (sessions paid in TUSD on anvil, captured, refunded and voided; the service's
signed event deliveries verified; a cancel moments after the payment, before the service
records who paid, voided once it does, with a transfer mined after the cancel call; a partly
paid one's part refunded; a session deleted or re-priced after its payment paid back, the
re-priced one canceled with no second invoice to pay; an unpaid one cancelled, or re-priced
to a new invoice), and inside a real Medusa server (`medusa start` on PostgreSQL)
through its HTTP API: a storefront's cart, payment session and checkout on the store routes,
paid on anvil, completed into an authorized order; captured and a second order cancelled
(voided) on the admin routes; the service's webhooks delivered to Medusa's webhook route
placing and capturing a third order, and an admin refund paying the payer back on anvil. Its
npm packages are installed from its lock file (`npm ci`) as CI would, once per lock file on
this machine (tests/support/npm_install.py). The Medusa server's database is made on
MEDUSA_TEST_POSTGRES (default the local PostgreSQL server) and dropped, whichever database
kind this run uses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.dev_service import shared_dev
from tests.support.npm_install import install

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    # Medusa itself runs on PostgreSQL whichever database this suite uses, and CI runs both
    # suites at once: the PostgreSQL suite runs it, so one `npm ci` of the folder runs at a time.
    pytest.mark.skipif(
        os.environ.get("INVOICING_TEST_DATABASE", "sqlite") == "sqlite",
        reason="runs in the PostgreSQL suite (make test DB=postgres)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "integrations" / "medusa"
TEST_COUNT = 13


def _run(command: list[str], env: dict[str, str], timeout_s: int) -> str:
    result = subprocess.run(
        command, cwd=FOLDER, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    return result.stdout


# `npm ci` of about 720 MB (a few minutes on a loaded 2-core machine; seconds once its lock
# file's packages are in this machine's cache), the compile, then the suites: about 20 s
# direct, 70 s for the Medusa server (its migrations take half a minute, two more boots 10 s:
# `medusa user`, `medusa start`; the webhook route's deliveries are processed after Medusa's
# 5 s delay).
@pytest.mark.timeout(1500)
def test_the_medusa_provider_suite_passes_against_invoicing_dev(
    request: pytest.FixtureRequest,
) -> None:
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed (Node 20.19 or later)"
    dev = shared_dev(request.config)
    env = {**os.environ, "INVOICING_DEV_READY": dev.ready_line}
    install(FOLDER, ROOT, ["clients/js"], npm, 420)
    _run([npm, "run", "build"], env, 120)
    tests = sorted(str(path) for path in (FOLDER / "dist" / "test").glob("*.test.js"))
    assert tests, "the build wrote no test files"
    output = _run(["node", "--test", "--test-reporter=tap", *tests], env, 900)
    summary = [line for line in output.splitlines() if line.startswith("# ")]
    assert "# fail 0" in summary, summary
    assert f"# pass {TEST_COUNT}" in summary, summary
