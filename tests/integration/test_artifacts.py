"""The committed contract artifacts are what the pinned compiler makes of the sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from invoicing.chain.artifacts import ESCROW, PAYMENT_FACTORY, TEST_TOKEN, load_artifact

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_committed_artifacts_match_a_fresh_compile() -> None:
    node = shutil.which("node")
    assert node is not None, "node is required to recompile the contracts"

    result = subprocess.run(
        [node, "scripts/compile.mjs", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr + result.stdout


def test_artifacts_load_from_the_package() -> None:
    for name in (PAYMENT_FACTORY, ESCROW, TEST_TOKEN):
        artifact = load_artifact(name)
        assert artifact.name == name
        assert artifact.bytecode

    # The escrow init code is hashed into every escrow address: it must stay small and fixed.
    assert len(load_artifact(ESCROW).bytecode) < 128
