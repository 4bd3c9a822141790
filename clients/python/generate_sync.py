"""Write the blocking client from the asyncio one, so the two are never written twice.

    python clients/python/generate_sync.py           # rewrite the _sync_*.py modules
    python clients/python/generate_sync.py --check   # exit 1 when one is out of date

Each ``invoicing_client/_async_*.py`` becomes ``_sync_*.py``: ``async``/``await`` dropped,
``Async`` names made plain (``AsyncClient`` → ``Client``, ``AsyncIterator`` → ``Iterator``),
``asyncio.sleep`` → ``time.sleep``, ``aclose``/``__aenter__``/``__aexit__`` → their blocking
names; then ruff sorts the imports and formats it. ``tests/unit/test_sdk_coverage.py`` runs
the check.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent / "src" / "invoicing_client"
HEADER = "# Generated from {source} by clients/python/generate_sync.py: edit that file instead.\n"
REPLACEMENTS = [
    (r"\basync def\b", "def"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"^import asyncio$", "import time"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"^from invoicing_client\._async_", "from invoicing_client._sync_"),
    (r"\bAsync([A-Z]\w*)\b", r"\1"),
]


def unasync(source: str, target: Path) -> str:
    """The blocking module, formatted as ``make lint`` wants it (imports sorted, ruff format)."""
    for pattern, replacement in REPLACEMENTS:
        source = re.sub(pattern, replacement, source, flags=re.MULTILINE)
    # ``yield from`` has no asyncio form: the loop the async generator needs is rewritten.
    fix = ["check", "--select", "I,UP028", "--fix", "--unsafe-fixes", "--quiet"]
    for command in (fix, ["format", "--quiet"]):
        source = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(target), "-"],
            input=source,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return source


def generated() -> dict[Path, str]:
    """Every generated module's path and text."""
    out = {}
    for path in sorted(PACKAGE.glob("_async_*.py")):
        target = path.with_name(path.name.replace("_async_", "_sync_", 1))
        out[target] = HEADER.format(source=path.name) + unasync(path.read_text(), target)
    return out


def main(argv: list[str]) -> int:
    modules = generated()
    stale = [
        path for path, text in modules.items() if not path.exists() or path.read_text() != text
    ]
    if "--check" in argv:
        for path in stale:
            sys.stderr.write(f"{path.name} is out of date: run {Path(__file__).name}\n")
        return 1 if stale else 0
    for path, text in modules.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
