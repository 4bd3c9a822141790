"""The docs' quickstart as a newcomer follows it: its shell snippets marked
``<!-- quickstart: run -->`` (the Python one runs through the venv's interpreter, as the page
says), run in order in one shell against a real `invoicing dev`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from tests.support.dev_service import shared_dev

pytestmark = pytest.mark.acceptance

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "docs/quickstart.md"
MARKER = "<!-- quickstart: run -->"


def marked_snippets(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block right after the marker line, in order."""
    found = re.findall(
        rf"^{re.escape(MARKER)}\n```(\w+)\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL
    )
    return [(language, code) for language, code in found]


def as_shell(snippets: list[tuple[str, str]]) -> str:
    """One bash script of the shell blocks, as written."""
    assert all(language == "sh" for language, _ in snippets), snippets
    return "\n".join(["set -euo pipefail", *(code for _, code in snippets)]) + "\n"


def test_the_quickstart_marks_its_snippets() -> None:
    snippets = marked_snippets(QUICKSTART.read_text())
    assert [language for language, _ in snippets] == ["sh", "sh", "sh", "sh", "sh"]


def test_the_export_block_names_every_variable_the_snippets_read() -> None:
    markdown = QUICKSTART.read_text()
    exported = set(re.findall(r"^export (\w+)=", markdown, flags=re.MULTILINE))
    exported |= set(re.findall(r"^export \w+=\S+ (\w+)=", markdown, flags=re.MULTILINE))
    code = "\n".join(code for _, code in marked_snippets(markdown))
    read = set(re.findall(r"\$\{?(\w+)", code)) | set(re.findall(r'os\.environ\["(\w+)"\]', code))
    assigned = set(re.findall(r"^(?:export )?(\w+)=", code, flags=re.MULTILINE))

    assert read - assigned <= exported, read - assigned - exported


@pytest.mark.slow
@pytest.mark.timeout(240)  # may start the shared `invoicing dev` (slow on a loaded machine)
def test_the_quickstart_runs_against_invoicing_dev(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    dev = shared_dev(request.config)
    owner, key = dev.ready["owner"], dev.ready["api_key"]
    base = dev.ready["base_url"]
    env = {
        **os.environ,
        "BASE": base,
        "RPC": dev.ready["rpc_url"],
        "OWNER": owner,
        "KEY": key,
        "TUSD": dev.ready["tokens"]["TUSD"],
    }
    # The reader runs the snippets from the repository's root, where `make run` made .venv.
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    script = as_shell(marked_snippets(QUICKSTART.read_text()))
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stdout + result.stderr

    # What the page says the reader sees: both invoices paid, the TUSD one created as printed.
    assert result.stdout.replace(" ", "").count('"status":"paid"') == 2, result.stdout
    printed = re.escape(base) + "/pay/0x[0-9a-fA-F]{40}"
    # curl prints no newline of its own: the Python line is followed by the payment.
    assert re.search(rf"201 pending 25000000 {printed}\n", result.stdout), result.stdout
    native = invoice_of(base, owner, key, "quickstart-1")
    assert (native["status"], native["balanceRaw"]) == ("paid", "10000000000000000")
    assert native["requiredRaw"] == "10000000000000000"
    token = invoice_of(base, owner, key, "quickstart-2")
    assert (token["status"], token["tokenAddress"]) == ("paid", dev.ready["tokens"]["TUSD"])
    assert (token["requiredRaw"], token["balanceRaw"]) == ("25000000", "25000000")


def invoice_of(base: str, owner: str, key: str, invoice_id: str) -> dict[str, Any]:
    """The owner's invoice ``invoice_id`` on the dev chain, as the list answers it."""
    listed = httpx.get(
        f"{base}/integration/invoices",
        params={"ownerAddress": owner, "invoiceId": invoice_id},
        headers={"x-service-api-key": key},
    ).json()
    (invoice,) = listed["items"]
    return cast(dict[str, Any], invoice)
