"""A few lines of JavaScript run by Node in the repository, their answer read as JSON: how the
unit tests hold the JS SDK (``clients/js``) against the service's own lists."""

from __future__ import annotations

import json
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
