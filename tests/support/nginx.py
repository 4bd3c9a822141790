"""nginx run for real in front of an API, with the shipped site (deploy/nginx/invoicing.conf)
in a test prefix: its ports, its certificate (a fresh self-signed one) and its upstream
replaced, nothing else changed."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.support.server import free_port

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "invoicing.conf"


def debian_tool(name: str) -> str:
    """The path of a Debian tool the checks need (scripts/install-browser-deps.sh installs
    it); a missing one skips locally and fails in CI (``CI=true``)."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        reason = f"{name} is missing: run scripts/install-browser-deps.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class Nginx:
    def __init__(self, https_url: str, http_url: str) -> None:
        self.https_url = https_url
        self.http_url = http_url


def _nginx_files(tmp_path: Path, upstream_port: int) -> tuple[Path, int, int]:
    """The shipped site inside a minimal nginx.conf of a test prefix: its ports, its
    certificate (a fresh self-signed one) and its upstream replaced; nothing else changed."""
    https_port, http_port = free_port(), free_port()
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost",
            "-keyout", str(tmp_path / "privkey.pem"), "-out", str(tmp_path / "fullchain.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    site = SITE.read_text()
    replacements = {
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "listen [::]:80;": "",
        "listen 443 ssl http2;": f"listen 127.0.0.1:{https_port} ssl http2;",
        "listen [::]:443 ssl http2;": "",
        "/etc/ssl/invoicing/": f"{tmp_path}/",
        "server 127.0.0.1:8000;": f"server 127.0.0.1:{upstream_port};",
    }
    for old, new in replacements.items():
        assert old in site, old
        site = site.replace(old, new)
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "logs").mkdir()
    temp = "".join(
        f"{kind}_temp_path {tmp_path}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (tmp_path / "nginx.conf").write_text(
        f"worker_processes 1;\npid {tmp_path}/nginx.pid;\nerror_log stderr;\n"
        "events { worker_connections 256; }\n"
        f"http {{\naccess_log off;\n{temp}include {tmp_path}/site.conf;\n}}\n"
    )
    return tmp_path / "nginx.conf", https_port, http_port


@asynccontextmanager
async def nginx_in_front(upstream_url: str, tmp_path: Path) -> AsyncIterator[Nginx]:
    nginx = debian_tool("nginx")
    port = int(upstream_url.rsplit(":", 1)[1])
    conf, https_port, http_port = _nginx_files(tmp_path, port)
    base = [nginx, "-p", str(tmp_path), "-c", str(conf), "-e", "stderr"]
    check = await asyncio.create_subprocess_exec(
        *base, "-t", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(check.communicate(), timeout=300)
    assert check.returncode == 0, err.decode()
    process = await asyncio.create_subprocess_exec(
        *base, "-g", "daemon off;", stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", https_port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield Nginx(f"https://127.0.0.1:{https_port}", f"http://127.0.0.1:{http_port}")
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=10)
