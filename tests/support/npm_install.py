"""A folder's npm packages as `npm ci` installs them from its lock file, installed once per
lock file on this machine and hard-linked into the folder afterwards.

The Medusa provider's packages are about 720 MB in 30,000 files: unpacking them is minutes of
a loaded 2-core machine, on every run of its test. Here `npm ci` runs in a copy of the
folder's package files under the user's cache (``$XDG_CACHE_HOME/invoicing-tests/npm``) the
first time a lock file is seen; each run then links those files into the folder's
``node_modules`` (``cp -al``: seconds), as `npm ci` would leave it. The key covers all that
`npm ci` reads: the package files, the local packages they name (``file:`` dependencies,
which npm copies in) and Node's version. Nothing writes into the linked files (the build
writes ``dist``), so the cached copy stays as npm left it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "invoicing-tests" / "npm"
PACKAGE_FILES = ("package.json", "package-lock.json", ".npmrc")
DONE = "installed"  # written last: a cache entry without it is an interrupted install


def install(
    folder: Path, root: Path, local_packages: Iterable[str], npm: str, timeout_s: int
) -> None:
    """``folder/node_modules`` exactly as ``npm ci`` makes it from ``folder``'s lock file.
    ``root`` is the repository, ``local_packages`` the folders (relative to ``root``) that the
    package file names with ``file:``."""
    local = sorted(local_packages)
    entry = CACHE / _key(folder, root, local)
    installed = entry / folder.relative_to(root) / "node_modules"
    if not (entry / DONE).exists():
        _install_into(entry, folder, root, local, npm, timeout_s)
    target = folder / "node_modules"
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    subprocess.run(["cp", "-al", str(installed), str(target)], check=True)


def _install_into(
    entry: Path, folder: Path, root: Path, local: list[str], npm: str, timeout_s: int
) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=CACHE))
    try:
        copy = staging / folder.relative_to(root)
        copy.mkdir(parents=True)
        for name in PACKAGE_FILES:
            if (folder / name).exists():
                shutil.copy2(folder / name, copy / name)
        for package in local:
            shutil.copytree(root / package, staging / package, ignore=_NOT_PACKAGED)
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        (staging / DONE).touch()
        shutil.rmtree(entry, ignore_errors=True)  # an interrupted install's leftovers
        staging.rename(entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


_NOT_PACKAGED = shutil.ignore_patterns("node_modules", "test", "dist")


def _key(folder: Path, root: Path, local: list[str]) -> str:
    digest = hashlib.sha256()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    digest.update(node.stdout.encode())
    files = [folder / name for name in PACKAGE_FILES if (folder / name).exists()]
    for package in local:
        files += sorted(
            p
            for p in (root / package).rglob("*")
            if p.is_file() and not _skipped(p, root / package)
        )
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _skipped(path: Path, package: Path) -> bool:
    return path.relative_to(package).parts[0] in {"node_modules", "test", "dist"}
