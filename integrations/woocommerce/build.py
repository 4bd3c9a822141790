"""Builds build/invoicing-gateway.zip, the file WordPress installs (Plugins > Add New >
Upload Plugin): the plugin's folder `invoicing-gateway/` with its PHP files and README, no
tests. The same sources give the same bytes (fixed timestamps, sorted entries)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = [
    "invoicing-gateway.php",
    "README.md",
    *sorted(p.name for p in (HERE / "includes").glob("*.php")),
]


def build(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in FILES:
            source = HERE / name if (HERE / name).exists() else HERE / "includes" / name
            inside = source.relative_to(HERE).as_posix()
            entry = zipfile.ZipInfo(f"invoicing-gateway/{inside}", date_time=(2020, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, source.read_bytes())
    return out


if __name__ == "__main__":
    default = HERE / "build" / "invoicing-gateway.zip"
    sys.stdout.write(f"{build(Path(sys.argv[1]) if len(sys.argv) > 1 else default)}\n")
