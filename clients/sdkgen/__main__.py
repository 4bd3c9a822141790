"""``python -m clients.sdkgen [--check] [--out DIR] [--spec openapi.json]``: see the package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import REPO, generate_from
from .spec import SpecError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.sdkgen")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    parser.add_argument("--out", type=Path, default=REPO, help="root to write under")
    parser.add_argument("--spec", type=Path, default=REPO / "openapi.json")
    args = parser.parse_args(argv)
    try:
        files = generate_from(args.spec)
    except SpecError as exc:
        sys.stderr.write(f"{args.spec}: {exc}\n")
        return 2
    stale = [
        path
        for path, text in files.items()
        if not (args.out / path).exists() or (args.out / path).read_text() != text
    ]
    if args.check:
        for path in stale:
            sys.stderr.write(f"{path} is out of date: run make sdk\n")
        return 1 if stale else 0
    for path in stale:
        (args.out / path).parent.mkdir(parents=True, exist_ok=True)
        (args.out / path).write_text(files[path])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
