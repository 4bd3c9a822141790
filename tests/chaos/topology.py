"""The chaos suite's world: anvil (1 s blocks) and PostgreSQL, each behind a TcpProxy; two
``invoicing serve`` and two ``invoicing worker`` processes started as
docs/operations/production.md says (a chains file, ``INVOICING_*`` variables,
``invoicing migrate``); a webhook receiver on real HTTP that fails a share of first
deliveries.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account
from sqlalchemy.engine import make_url

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.db import Database
from tests.support.receiver import Receiver
from tests.support.server import free_port
from tests.support.tcp_proxy import TcpProxy

INVOICING = str(Path(sys.executable).with_name("invoicing"))
# Payers: anvil accounts 1..9 (account 0 is the relayer, whose nonces the service owns).
PAYER_KEYS = DEV_PRIVATE_KEYS[1:10]


class ServiceProcess:
    """One ``invoicing`` subprocess in its own process group, its output in a log file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> ServiceProcess:
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [INVOICING, *self.args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def cpu_s(self) -> float:
        """CPU seconds the process has used (0 when it is not running)."""
        if not self.alive:
            return 0.0
        assert self.process is not None
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs; whatever it held in flight is lost."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        if self.alive:
            self._signal(signal.SIGTERM)
            try:
                assert self.process is not None
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            if sig == signal.SIGKILL:
                self.process.wait(10)

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        kept = [line for line in text.splitlines() if not line.startswith("--- start")]
        return f"== {self.name} (started {self.starts} times)\n" + "\n".join(kept[-lines:])


@dataclass
class Api:
    """One ``invoicing serve`` process and a client for it."""

    process: ServiceProcess
    base_url: str
    http: httpx.AsyncClient


@dataclass
class Topology:
    anvil: AnvilProcess
    dev: DevDeployment
    evm: EvmClient  # straight to anvil: the payers' own node, never cut
    chain_proxy: TcpProxy
    db_proxy: TcpProxy
    db: Database  # straight to PostgreSQL: what the test reads to check, never cut
    env: dict[str, str]
    apis: list[Api]
    workers: list[ServiceProcess]
    hooks: Receiver
    log_dir: Path
    payer_nonces: dict[str, int] = field(default_factory=dict)

    @property
    def processes(self) -> list[ServiceProcess]:
        return [api.process for api in self.apis] + self.workers

    def exited(self) -> list[str]:
        """The processes that are not running (none should be, outside a kill)."""
        return [p.name for p in self.processes if not p.alive]

    def tails(self) -> str:
        return "\n".join(p.tail() for p in self.processes)

    async def api_key(self, owner: str) -> str:
        """An API key issued the production page's way: ``invoicing api-keys create --owner``."""
        out = await run_invoicing(self.env, "api-keys", "create", "--owner", owner)
        return str(json.loads(out)["apiKey"])

    async def pay(self, payments: list[tuple[str, int]]) -> None:
        """Send each ``(paymentAddress, wei)`` from the payers, spread over them; returns once
        every transaction is accepted by the node (mined within a block or two)."""
        by_payer: dict[int, list[tuple[str, int]]] = {}
        for i, payment in enumerate(payments):
            by_payer.setdefault(i % len(PAYER_KEYS), []).append(payment)
        await asyncio.gather(*(self._pay_from(i, items) for i, items in by_payer.items()))

    async def _pay_from(self, payer: int, items: list[tuple[str, int]]) -> None:
        key = PAYER_KEYS[payer]
        sender = Account.from_key(key).address
        if sender not in self.payer_nonces:
            self.payer_nonces[sender] = await self.evm.get_transaction_count(sender)
        for to, value in items:
            nonce = self.payer_nonces[sender]
            self.payer_nonces[sender] += 1
            tx = {
                "to": to,
                "value": value,
                "nonce": nonce,
                "gas": 21_000,
                "maxFeePerGas": 10 * 10**9,
                "maxPriorityFeePerGas": 10**9,
                "chainId": self.dev.chain_id,
                "type": 2,
            }
            _hash, raw = self.evm.sign_transaction(key, tx)
            await self.evm.send_raw_transaction(raw)


async def run_invoicing(env: dict[str, str], *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        INVOICING, *args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=300)
    if process.returncode != 0:
        raise AssertionError(f"invoicing {' '.join(args)}: exit {process.returncode}: {err!r}")
    return out.decode()


def proxied_database_url(url: str, proxy: TcpProxy) -> str:
    """``url`` (asyncpg) with its host and port replaced by the proxy's, as a plain
    ``postgresql://`` URL (the production page's form)."""
    parsed = make_url(url).set(drivername="postgresql", host="127.0.0.1", port=proxy.port)
    return parsed.render_as_string(hide_password=False)


def write_chains_file(path: Path, dev: DevDeployment, rpc_url: str) -> Path:
    path.write_text(
        "[[chain]]\n"
        f"chain_id = {dev.chain_id}\n"
        'name = "Anvil (chaos)"\n'
        f'rpc_url = "{rpc_url}"\n'
        f'factory = "{dev.factory}"\n'
        "confirmations = 1\n"
        'relayer_key = "env:CHAOS_RELAYER_KEY"\n'
        "[[chain.token]]\n"
        f'address = "{dev.token}"\n'
        f'symbol = "{dev.token_symbol}"\n'
        f"decimals = {dev.token_decimals}\n"
    )
    return path


def service_env(database_url: str, chains_file: Path) -> dict[str, str]:
    """The environment of every service process: the production page's variables, with the intervals
    of a test (seconds instead of minutes) so that a scenario ends in CI time."""
    return {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_CHAINS_FILE": str(chains_file),
        "INVOICING_ENVIRONMENT": "development",
        "INVOICING_SECRET": "chaos-" + "0" * 58,
        "CHAOS_RELAYER_KEY": DEV_PRIVATE_KEYS[0],
        "INVOICING_WEBHOOK_ALLOW_PRIVATE": "true",
        "INVOICING_WEBHOOK_ALLOW_HTTP": "true",
        "INVOICING_WEBHOOK_RETRY_DELAY_S": "1",
        "INVOICING_WEBHOOK_TIMEOUT_S": "3",
        "INVOICING_WEBHOOK_POLL_INTERVAL_S": "0.1",
        "INVOICING_MONITOR_INTERVAL_S": "2",
        "INVOICING_MONITOR_POLL_INTERVAL_S": "0.2",
        "INVOICING_MONITOR_LEASE_S": "3",
        "INVOICING_WITHDRAWAL_INTERVAL_S": "2",
        "INVOICING_SETTLEMENT_POLL_INTERVAL_S": "0.5",
        "INVOICING_SETTLEMENT_BACKOFF_MAX_S": "2",
        "INVOICING_RELAYER_RESEND_AFTER_S": "10",
        "INVOICING_SUBSCRIPTION_INTERVAL_S": "0.5",
        "INVOICING_RPC_TIMEOUT_S": "3",
        "INVOICING_RPC_BACKOFF_MAX_S": "1",
        "INVOICING_RPC_COOLDOWN_S": "2",
        "INVOICING_OWNER_RATE_LIMIT_PER_MINUTE": "0",
        "INVOICING_PAY_RATE_LIMIT_PER_MINUTE": "0",
        # One owner's 1,000 invoices are swept in many small batches, and a killed worker's
        # withdrawal is sent again: more than the default day's budget of one owner (200
        # transactions, 50M gas), after which the sweeps would wait for the next day.
        "INVOICING_RELAYER_OWNER_TX_PER_DAY": "5000",
        "INVOICING_RELAYER_OWNER_GAS_PER_DAY": "500000000",
    }


def start_api(env: dict[str, str], log_dir: Path, name: str) -> Api:
    port = free_port()
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--no-access-log"]
    process = ServiceProcess(name, args, env, log_dir).start()
    base_url = f"http://127.0.0.1:{port}"
    # Idle connections are dropped before uvicorn's 5 s keep-alive ends, so a request never
    # goes out on a connection the server is closing.
    limits = httpx.Limits(keepalive_expiry=2)
    return Api(process, base_url, httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits))


def start_worker(env: dict[str, str], log_dir: Path, name: str) -> ServiceProcess:
    return ServiceProcess(name, ["worker"], env, log_dir).start()


async def wait_until(
    check: Callable[[], Awaitable[bool]],
    timeout_s: float,
    what: str,
    topology: Topology,
    progress: Callable[[], Awaitable[object]] | None = None,
) -> float:
    """Poll ``check`` until true; returns the seconds it took. On timeout fails with
    ``progress()`` and the processes' last log lines."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout_s:
            seen = await progress() if progress is not None else ""
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what}: {seen}\n{topology.tails()}"
            )
        await asyncio.sleep(0.25)
    return time.monotonic() - started


async def wait_healthy(api: Api, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if not api.process.alive:
            raise AssertionError(f"{api.process.name} exited\n{api.process.tail()}")
        try:
            if (await api.http.get("/healthz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{api.process.name} not up\n{api.process.tail()}")
        await asyncio.sleep(0.1)


def error_code(response: httpx.Response) -> str | None:
    """The documented error shape's code, or None when the body is not that shape."""
    try:
        body: Any = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or set(body) != {"error"}:
        return None
    error = body["error"]
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    code = error.get("code")
    return code if isinstance(code, str) else None


def count_statuses(responses: list[httpx.Response]) -> Counter[tuple[int, str | None]]:
    return Counter((r.status_code, error_code(r)) for r in responses)
