"""JavaScript run by Node in the repository, its answer read as JSON: a few lines (how the unit
tests hold the JS SDK, ``clients/js``, against the service's own lists), or a script of
``tests/js`` with its arguments (what ethers.js signs, as a wallet would)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def node_json(script: str) -> Any:
    """What ``script`` (an ES module that prints one JSON line) prints, parsed."""
    result = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(result.stdout)


def run_node_script(script: Path, *args: object) -> Any:
    """What ``script`` prints (one JSON value) when run with ``args``, parsed."""
    node = shutil.which("node")
    assert node is not None, "node is required to run " + script.name
    result = subprocess.run(
        [node, str(script), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(result.stdout)
