"""The TypeScript SDK (`clients/js`, `@invoicing/client`): its Node test-runner suite against a
real `invoicing dev` (both auth modes, payments on anvil, webhooks, fees) and offline."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.dev_service import shared_dev

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TEST_FILES = sorted(str(path) for path in (REPO / "clients/js/test").glob("*.test.mjs"))


# The whole Node suite in one test (about 25 s with the dev service's start; more on a
# loaded machine), so it gets more than the default 120 s.
@pytest.mark.timeout(300)
def test_the_js_sdk_suite_passes_against_invoicing_dev(request: pytest.FixtureRequest) -> None:
    dev = shared_dev(request.config)
    assert len(TEST_FILES) >= 2  # the service suite and the offline one
    result = subprocess.run(
        ["node", "--test", "--test-reporter=tap", *TEST_FILES],
        cwd=REPO,
        env={**os.environ, "INVOICING_DEV_READY": dev.ready_line},
        capture_output=True,
        text=True,
        timeout=240,
    )
    summary = [line for line in result.stdout.splitlines() if line.startswith("# ")]
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert "# fail 0" in summary, summary
    passed = int(next(line for line in summary if line.startswith("# pass")).split()[-1])
    assert passed >= 25, summary
