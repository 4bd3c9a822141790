"""The deploy guide (docs/operations/deploy.md) followed on this machine, from a clean
PostgreSQL role with a password to a paid invoice behind nginx.

The guide's shell blocks marked ``<!-- guide: NAME -->`` run as written, with only what must
differ on a test machine replaced (each replacement must find its text, so the guide cannot
drift from what runs): this checkout's venv for /opt/invoicing/venv, a temporary directory
for /etc/invoicing, a fresh role and database on the suite's PostgreSQL, anvil for the
chain, nginx's test prefix for pay.example.com, no ``sudo`` or ``chgrp`` to a system user.
The units' ``ExecStart`` lines (deploy/systemd) run with their ``EnvironmentFile`` as
systemd would start them; the shipped nginx site runs in front of ``invoicing serve``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from sqlalchemy.engine import make_url

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from tests.conftest import TEST_DATABASE
from tests.support.nginx import nginx_in_front
from tests.support.server import free_port
from tests.support.signing import new_owner

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "operations" / "deploy.md"
UNITS = REPO / "deploy" / "systemd"
VENV = Path(sys.executable).parent.parent
STEPS = ["install", "database", "settings", "relayer", "chains", "units", "nginx"]
STEPS += ["first-key", "invoice", "status"]
FUNDER_KEY = DEV_PRIVATE_KEYS[9]


def guide_blocks() -> dict[str, str]:
    """The guide's marked shell blocks by name, in order."""
    found = re.findall(
        r"^<!-- guide: ([\w-]+) -->\n```sh\n(.*?)^```$",
        GUIDE.read_text(),
        flags=re.MULTILINE | re.DOTALL,
    )
    return {name: code for name, code in found}


def json_values(text: str) -> list[dict[str, Any]]:
    """The JSON objects ``text`` holds one after another (curl adds no newline after one)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        value, at = decoder.raw_decode(text, at)
        found.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return found


def replaced(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in code, f"the guide no longer says {old!r}"
        code = code.replace(old, new)
    return code


def test_the_guide_marks_every_step_from_install_to_a_paid_invoice() -> None:
    blocks = guide_blocks()

    assert list(blocks) == STEPS
    assert "invoicing-serve invoicing-worker" in blocks["units"]
    assert "cp deploy/nginx/invoicing.conf" in blocks["nginx"]
    assert "invoicing deploy" in blocks["chains"]


class Machine:
    """The test machine's stand-ins for what the guide names."""

    def __init__(self, tmp_path: Path, anvil: AnvilProcess, chain_id: int, site: str) -> None:
        self.etc = tmp_path / "etc"
        self.etc.mkdir()
        self.role = f"inv_{uuid.uuid4().hex[:10]}"
        self.owner = new_owner().address
        admin = make_url(TEST_DATABASE)
        self.admin = admin.set(drivername="postgresql").render_as_string(False)
        self.pg = f"-h {admin.host} -p {admin.port or 5432} -U {admin.username}"
        self.common = {
            "/opt/invoicing/venv": str(VENV),
            "/etc/invoicing": str(self.etc),
            "sudo -u invoicing ": "",
            "0xYourWalletAddress": self.owner,
            "https://base-rpc.example": anvil.url,
            "https://pay.example.com": site,
            "8453": str(chain_id),
            "curl -s": "curl -sfk",
        }

    def script(self, code: str, **replacements: str) -> str:
        return self.local(code, replacements)

    def local(self, code: str, replacements: dict[str, str]) -> str:
        code = replaced(code, replacements)
        for old, new in self.common.items():
            code = code.replace(old, new)
        return code

    async def run(self, script: str, env: dict[str, str] | None = None) -> str:
        code, out, err = await command(["bash", "-c", "set -euo pipefail\n" + script], env)
        assert code == 0, f"{script}\n--- stdout\n{out}\n--- {err}"
        return out

    def drop(self) -> None:
        subprocess.run(
            ["psql", self.admin, "-c", f'DROP DATABASE IF EXISTS "{self.role}" WITH (FORCE)'],
            capture_output=True,
        )
        subprocess.run(["psql", self.admin, "-c", f'DROP ROLE IF EXISTS "{self.role}"'])


async def command(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``args`` run in the checkout."""
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def unit_command(name: str, machine: Machine) -> tuple[list[str], dict[str, str]]:
    """A unit's ExecStart and the environment its EnvironmentFile gives, on this machine."""
    text = machine.local((UNITS / name).read_text(), {})
    exec_start = re.search(r"^ExecStart=(.*)$", text, flags=re.MULTILINE)
    env_file = re.search(r"^EnvironmentFile=(.*)$", text, flags=re.MULTILINE)
    assert exec_start is not None and env_file is not None
    env = {}
    for line in Path(env_file[1]).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return exec_start[1].split(), env


@asynccontextmanager
async def started(command: list[str], env: dict[str, str], log: Path) -> AsyncIterator[None]:
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            yield
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


@pytest.mark.timeout(600)
async def test_the_deploy_guide_takes_a_clean_machine_to_a_paid_invoice(
    tmp_path: Path, anvil: AnvilProcess, evm: EvmClient, dev: DevDeployment
) -> None:
    if TEST_DATABASE == "sqlite":
        pytest.skip("the deploy guide is for PostgreSQL: it runs in the PostgreSQL suite")
    blocks = guide_blocks()
    api_port = free_port()
    (tmp_path / "nginx").mkdir()
    async with nginx_in_front(f"http://127.0.0.1:{api_port}", tmp_path / "nginx") as site:
        machine = Machine(tmp_path, anvil, dev.chain_id, site.https_url)
        try:
            await _follow(machine, blocks, api_port, evm, dev)
        finally:
            machine.drop()


async def _follow(
    machine: Machine, blocks: dict[str, str], api_port: int, evm: EvmClient, dev: DevDeployment
) -> None:
    m = machine
    setup = [
        m.script(
            blocks["database"],
            **{
                "sudo -u postgres psql": f"psql {m.admin}",
                "sudo -u postgres createdb": f"createdb {m.pg}",
                "ROLE invoicing": f"ROLE {m.role}",
                "--owner invoicing invoicing": f"--owner {m.role} {m.role}",
            },
        ),
        m.script(
            blocks["settings"],
            **{
                "-g invoicing ": "",
                "invoicing:$DB_PASSWORD@127.0.0.1/invoicing": (
                    f"{m.role}:$DB_PASSWORD@127.0.0.1/{m.role}"
                ),
            },
        ),
        m.script(blocks["relayer"], **{"chgrp invoicing": "true"}),
    ]
    printed = (await m.run("\n".join(setup))).split()
    # This machine's /etc/invoicing is a temporary directory: the settings file says so.
    env_path = m.etc / "invoicing.env"
    env_path.write_text(env_path.read_text().replace("/etc/invoicing", str(m.etc)))
    relayer = printed[-1]
    key_file = m.etc / "relayer-8453".replace("8453", str(dev.chain_id))
    assert Account.from_key(key_file.read_text().strip()).address == relayer
    # "Send that address some of the chain's native coin from your wallet."
    funded = await evm.transact(FUNDER_KEY, relayer, value=10**18)
    assert funded["status"] == 1
    token = (
        f'[[chain.token]]\naddress = "{dev.token}"\nsymbol = "{dev.token_symbol}"\n'
        f"decimals = {dev.token_decimals}\nTOML"
    )
    chains = m.script(
        blocks["chains"],
        **{
            "chgrp invoicing": "true",
            "rpc_urls = [": 'name = "Anvil"\nconfirmations = 1\nrpc_urls = [',
            '-8453"\nTOML': f'-8453"\n{token}',
        },
    )
    deployed = json.loads((await m.run(chains)).strip().splitlines()[-1])
    assert deployed["chainId"] == dev.chain_id
    settings = (m.etc / "invoicing.env").read_text()
    assert f"postgresql://{m.role}:" in settings and f"INVOICING_OWNERS={m.owner}" in settings
    password = await _role_password(m)
    assert password, "the role has no password"

    migrate, env = unit_command("invoicing-migrate.service", m)
    code, _, err = await command(migrate, env)
    assert code == 0, err
    serve, env = unit_command("invoicing-serve.service", m)
    serve = [str(api_port) if part == "8000" else part for part in serve]
    worker, _ = unit_command("invoicing-worker.service", m)
    worker = [str(free_port()) if part == "9464" else part for part in worker]
    async with (
        started(serve, env, m.etc / "serve.log"),
        started(worker, env, m.etc / "worker.log"),
    ):
        await _ready(m, env)
        first_key = await m.run(m.script(blocks["first-key"]))
        api_key = json.loads(first_key.splitlines()[0])["apiKey"]
        assert "/dashboard/login" in first_key.splitlines()[-1]
        invoice_out = await m.run(
            m.script(blocks["invoice"], **{"KEY=the-apiKey-printed-above": f"KEY={api_key}"})
        )
        invoice = json_values(invoice_out)[-1]
        assert (invoice["status"], invoice["amount"]) == ("pending", "0.001")
        paid = await evm.transact(FUNDER_KEY, invoice["paymentAddress"], value=10**15)
        status_script = m.script(
            blocks["status"],
            **{
                "PAYMENT_ADDRESS=the-paymentAddress-answered-above": (
                    f"PAYMENT_ADDRESS={invoice['paymentAddress']}"
                )
            },
        )
        found = await _until_paid(m, status_script, api_key)

    assert found["status"] == "paid" and found["balanceRaw"] == str(10**15)
    assert found["payments"] == [
        {
            "txHash": paid["transactionHash"],
            "from": Account.from_key(FUNDER_KEY).address,
            "amountRaw": str(10**15),
            "tokenAddress": None,
            "blockNumber": int(paid["blockNumber"]),
        }
    ]


async def _role_password(machine: Machine) -> str:
    query = f"SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = '{machine.role}'"
    code, out, err = await command(["psql", machine.admin, "-tAc", query])
    assert code == 0, err
    return out.strip() if out.strip() == "t" else ""


async def _ready(machine: Machine, env: dict[str, str]) -> None:
    """Until the API answers /readyz through nginx."""
    deadline = time.monotonic() + 60
    readyz = f"curl -sfk {machine.common['https://pay.example.com']}/readyz"
    while True:
        code, _, _ = await command(["bash", "-c", readyz])
        if code == 0:
            return
        if time.monotonic() > deadline:
            log = (machine.etc / "serve.log").read_text()[-3000:]
            pytest.fail(f"the API behind nginx never answered /readyz: {log}")
        await asyncio.sleep(0.5)


async def _until_paid(machine: Machine, script: str, api_key: str) -> dict[str, object]:
    """The guide's status lookup, until the invoice is paid and its payment recorded."""
    deadline = time.monotonic() + 90
    while True:
        answer = json.loads((await machine.run(script, {"KEY": api_key})).strip())["invoice"]
        if answer["status"] == "paid" and answer.get("payments"):
            return dict(answer)
        if time.monotonic() > deadline:
            log = (machine.etc / "worker.log").read_text()[-3000:]
            pytest.fail(f"never paid with its payment recorded: {answer}\n{log}")
        await asyncio.sleep(1)
