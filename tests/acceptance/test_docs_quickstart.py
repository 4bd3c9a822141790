"""The docs' quickstart as a newcomer follows it: its shell and Python snippets marked
``<!-- quickstart: run -->``, run in order in one shell against a real `invoicing dev`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from eth_account import Account

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from tests.support.dev_service import DevService, shared_dev
from tests.support.signing import signed_headers

pytestmark = pytest.mark.acceptance

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "docs/quickstart.md"
MARKER = "<!-- quickstart: run -->"
ANVIL_0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"


def marked_snippets(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block right after the marker line, in order."""
    found = re.findall(
        rf"^{re.escape(MARKER)}\n```(\w+)\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL
    )
    return [(language, code) for language, code in found]


def as_shell(snippets: list[tuple[str, str]]) -> str:
    """One bash script: shell blocks as written, Python blocks fed to python3."""
    parts = ["set -euo pipefail"]
    for language, code in snippets:
        assert language in ("sh", "python"), language
        parts.append(code if language == "sh" else f"python3 - <<'PYTHON'\n{code}PYTHON")
    return "\n".join(parts) + "\n"


def api_key_of(dev: DevService) -> tuple[str, str]:
    """The ready line's owner and API key. Until `invoicing dev` prints them (issue 16), the
    same key is made here the way a newcomer could: signed by anvil account 0."""
    if "api_key" in dev.ready:
        return dev.ready["owner"], dev.ready["api_key"]
    body = {"ownerAddress": ANVIL_0, "label": "quickstart"}
    account = Account.from_key(DEV_PRIVATE_KEYS[0])
    response = httpx.post(
        f"{dev.ready['base_url']}/integration/api-keys",
        json=body,
        headers=signed_headers(account, "apikey.create", {"label": "quickstart"}),
    )
    assert response.status_code == 201, response.text
    return ANVIL_0, str(response.json()["apiKey"])


def test_the_quickstart_marks_its_snippets() -> None:
    snippets = marked_snippets(QUICKSTART.read_text())
    assert [language for language, _ in snippets] == ["sh", "sh", "sh", "python"]


@pytest.mark.slow
@pytest.mark.timeout(240)  # may start the shared `invoicing dev` (slow on a loaded machine)
def test_the_quickstart_runs_against_invoicing_dev(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    dev = shared_dev(request.config)
    owner, key = api_key_of(dev)
    base = dev.ready["base_url"]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "BASE": base,
        "RPC": dev.ready["rpc_url"],
        "OWNER": owner,
        "KEY": key,
        "TUSD": dev.ready["tokens"]["TUSD"],
    }
    script = as_shell(marked_snippets(QUICKSTART.read_text()))
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stdout + result.stderr

    # What the page says the reader sees: the native invoice paid, the TUSD one created.
    assert '"status":"paid"' in result.stdout.replace(" ", "")
    # curl prints no newline of its own: the Python block's line ends the output.
    printed = re.escape(base) + "/pay/0x[0-9a-fA-F]{40}"
    assert re.search(rf"201 pending 25000000 {printed}\n$", result.stdout), result.stdout
    listed = httpx.get(
        f"{base}/integration/invoices",
        params={"ownerAddress": owner, "invoiceId": "quickstart-1"},
        headers={"x-service-api-key": key},
    ).json()
    (invoice,) = listed["items"]
    assert (invoice["status"], invoice["balanceRaw"]) == ("paid", "10000000000000000")
    assert invoice["requiredRaw"] == "10000000000000000"
