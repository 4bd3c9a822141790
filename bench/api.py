"""API throughput: invoice create (API key, signature mode) and status lookup, against a
trivial route (``/healthz``) of the same app measured in the same run.

Starts anvil, deploys the dev contracts, runs ``invoicing serve`` as a separate process
(one uvicorn worker) on a fresh database and drives it for a few seconds per case. Prints
one line per case, e.g.::

    api create_api_key rps=812 trivial_rps=1650 ratio=0.49 cpu_us=1150 trivial_cpu_us=560
        rounds=0.47 0.49 0.52

The trivial route is measured before and after each case; a case's ratio is to their mean.
Every case runs ``--rounds`` times in turn (3 by default); its line is the median round.
``cpu_us`` is the server process's CPU time (user and system, read from ``/proc``) per
request over the same round, and ``trivial_cpu_us`` the trivial route's: on a machine that
other work slows, the ratio of requests per second drifts with the neighbours while the CPU
time per request still tells what a request costs the process.

A last line runs the same POST load on a bare FastAPI app (``framework_app.py``): a route that
only parses the body and answers with a body of a created invoice's size. Its ratio to its
own trivial route is the framework's ceiling for any create ratio.

The load comes from ``wrk`` (Debian package ``wrk``) in a separate process, so the client is
never the bottleneck; signature-mode requests are signed before timing, one timestamp each.

    .venv/bin/python bench/api.py [--seconds 5] [--rounds 3] [--concurrency 32]
        [--database-url URL]

A last block counts what each request costs the database and the chain: the same app built
in this process on the same database, each case sent 20 times through an in-process
transport, the database's round trips counted on the engines (every statement, BEGIN,
COMMIT and ROLLBACK) and the chain's calls on the RPC metric::

    api round_trips case=create_api_key db=6.70 rpc=0.00 goal_db=2

With ``--processes 1,2`` it instead shows that the API scales out on one database: it runs
one, then two ``invoicing serve`` processes on the same database (give a PostgreSQL
``--database-url``), spreads the load over all of them (one wrk per process, the
connections split between them) and prints one line per case and process count::

    api scale_out processes=2 case=create_api_key rps=1500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account
from sqlalchemy import Connection, Engine, event

from invoicing import metrics
from invoicing.auth.signatures import sign_request
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess, free_port
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.db import AUTOCOMMIT
from invoicing.migrate import upgrade
from invoicing.services import build_services
from invoicing.settings import Settings
from invoicing.web.app import create_app

sys.path.insert(0, str(Path(__file__).parent))
from monitor import fresh_database  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

INVOICING = str(Path(sys.executable).parent / "invoicing")
OWNER = Account.from_key(DEV_PRIVATE_KEYS[1])


def presigned(count: int, chain_id: int) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Signature-mode create requests signed before timing (the client's cost, not ours)."""
    now = time.time_ns() // 1_000_000
    requests = []
    for i in range(count):
        body = {"ownerAddress": OWNER.address, "chainId": chain_id, "amount": "1.5"}
        payload = {"chainId": chain_id, "amount": "1.5"}
        ts = now + i
        signature = sign_request(
            OWNER.key.to_0x_hex(), "invoice.create", OWNER.address, ts, payload
        )
        requests.append((body, {"x-service-signature": signature, "x-service-timestamp": str(ts)}))
    return requests


async def deploy(rpc_url: str) -> tuple[int, str]:
    evm = EvmClient.connect(rpc_url)
    try:
        deployment = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
    finally:
        await evm.aclose()
    return deployment.chain_id, deployment.factory


def bench(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    if not args.database_url:
        bench_on(f"sqlite:///{workdir}/bench.db", args, workdir)
        return
    database_url, drop = fresh_database(args.database_url)
    try:
        bench_on(database_url, args, workdir)
    finally:
        drop()


def bench_on(database_url: str, args: argparse.Namespace, workdir: Path) -> None:
    with AnvilProcess() as anvil:
        chain_id, factory = asyncio.run(deploy(anvil.url))
        asyncio.run(upgrade(database_url))
        chains = workdir / "chains.toml"
        chains.write_text(
            f'[[chain]]\nchain_id = {chain_id}\nname = "anvil"\n'
            f'rpc_url = "{anvil.url}"\nfactory = "{factory}"\n'
        )
        env = {
            **os.environ,
            "INVOICING_DATABASE_URL": database_url,
            "INVOICING_CHAINS_FILE": str(chains),
            "INVOICING_ENVIRONMENT": "development",
            # One owner sends every request: limits far above the load, so the bench measures
            # what counting costs without being refused.
            "INVOICING_OWNER_RATE_LIMIT_PER_MINUTE": "1000000000",
            "INVOICING_INVOICE_CREATION_PER_OWNER_PER_DAY": "1000000000",
            "INVOICING_MAX_WATCHED_INVOICES_PER_OWNER": "1000000000",
        }
        issued = subprocess.run(
            [INVOICING, "api-keys", "create", "--owner", OWNER.address],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        api_key = json.loads(issued)["apiKey"]
        if args.processes:
            for count in [int(c) for c in args.processes.split(",")]:
                with serving(count, env) as base_urls:
                    scale_out(base_urls, api_key, chain_id, args, workdir)
            return
        if args.smoke and shutil.which("wrk") is None:
            print("api load_cases not_run reason=wrk_not_installed", flush=True)
        else:
            with serving(1, env) as (base_url,):
                run_cases(base_url, api_key, chain_id, args, workdir)
        chain = ChainConfig(chain_id=chain_id, name="anvil", rpc_url=anvil.url, factory=factory)
        asyncio.run(round_trips(database_url, chain, api_key))


# What each request may cost the database (round trips); the status lookup also makes its
# one chain read.
ROUND_TRIP_GOALS = {"create_api_key": 2, "create_signature": 2, "status_api_key": 2}
ROUND_TRIP_REQUESTS = 20


class RoundTrips:
    """Counts the round trips of the engines it watches: statements, BEGIN, COMMIT, ROLLBACK.

    A BEGIN is counted once: SQLAlchemy's begin event, not also the ``BEGIN DEFERRED`` the
    SQLite engine sends for it as a statement. On an autocommit connection
    (``Database.reads``, ``Database.run_statement``) SQLAlchemy's begin, commit and rollback
    send nothing to the database, so only its statements count."""

    def __init__(self, engines: list[Engine]) -> None:
        self.count = 0
        for engine in engines:
            event.listen(engine, "before_cursor_execute", self._statement)
            for name in ("begin", "commit", "rollback"):
                event.listen(engine, name, self._transaction)

    def _statement(self, _connection: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.startswith("BEGIN"):
            self.count += 1

    def _transaction(self, connection: Connection, *_args: Any) -> None:
        if not connection.get_execution_options().get(AUTOCOMMIT):
            self.count += 1


def rpc_calls() -> float:
    return sum(
        sample.value
        for family in metrics.RPC_REQUESTS.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    )


async def round_trips(database_url: str, chain: ChainConfig, api_key: str) -> None:
    """One line per case: database round trips and chain calls per request (in-process)."""
    settings = Settings(
        environment="development",
        database_url=database_url,
        chains=[chain],
        run_workers=False,
        owner_rate_limit_per_minute=10**9,
        invoice_creation_per_owner_per_day=10**9,
        max_watched_invoices_per_owner=10**9,
    )
    services = build_services(settings)
    app = create_app(services, run_workers_in_process=False)
    counter = RoundTrips(services.db.sync_engines)
    body = {"ownerAddress": OWNER.address, "chainId": chain.chain_id, "amount": "1.5"}
    key = {"x-service-api-key": api_key}
    signed = presigned(2 * ROUND_TRIP_REQUESTS + 10, chain.chain_id)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://bench") as client,
    ):
        created = await client.post("/integration/invoices", json=body, headers=key)
        status_path = (
            f"/integration/invoices/status?ownerAddress={OWNER.address}"
            f"&paymentAddress={created.json()['paymentAddress']}"
        )

        async def create_api_key() -> httpx.Response:
            return await client.post("/integration/invoices", json=body, headers=key)

        async def create_signature() -> httpx.Response:
            signed_body, headers = signed.pop()
            return await client.post("/integration/invoices", json=signed_body, headers=headers)

        async def status_api_key() -> httpx.Response:
            return await client.get(status_path, headers=key)

        for case in (create_api_key, create_signature, status_api_key):
            for _ in range(3):  # warm caches (API key, prepared statements)
                await case()
            db_before, rpc_before = counter.count, rpc_calls()
            for _ in range(ROUND_TRIP_REQUESTS):
                answer = await case()
                if answer.status_code >= 300:
                    raise SystemExit(f"{case.__name__}: {answer.status_code} {answer.text}")
            db = (counter.count - db_before) / ROUND_TRIP_REQUESTS
            rpc = (rpc_calls() - rpc_before) / ROUND_TRIP_REQUESTS
            print(
                f"api round_trips case={case.__name__} db={db:.2f} rpc={rpc:.2f} "
                f"goal_db={ROUND_TRIP_GOALS[case.__name__]}",
                flush=True,
            )
    await services.db.dispose()


@dataclass(frozen=True)
class Load:
    """What a wrk run measured: requests per second over every process, and the CPU time
    (user and system) the server processes spent per request, in microseconds."""

    rps: float
    cpu_us: float


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def serving(count: int, env: dict[str, str]) -> Iterator[list[str]]:
    """``count`` ``invoicing serve`` processes on the same database; their base URLs (each
    process's pid is kept in ``SERVER_PIDS`` by its URL, for its CPU time)."""
    ports = [free_port() for _ in range(count)]
    servers = [
        subprocess.Popen(
            [INVOICING, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    SERVER_PIDS.update(zip(urls, (server.pid for server in servers), strict=True))
    try:
        yield urls
    finally:
        for url in urls:
            SERVER_PIDS.pop(url, None)
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=10)


def scale_out(
    base_urls: list[str], api_key: str, chain_id: int, args: argparse.Namespace, workdir: Path
) -> None:
    """Create and status lookup spread over every process (``--processes``): one line per
    case and process count; compare the lines of 1 and 2 processes of the same run."""
    for base_url in base_urls:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            wait_ready(client)
    body = {"ownerAddress": OWNER.address, "chainId": chain_id, "amount": "1.5"}
    with httpx.Client(base_url=base_urls[0], timeout=30) as client:
        created = client.post(
            "/integration/invoices", json=body, headers={"x-service-api-key": api_key}
        )
        payment_address = created.json()["paymentAddress"]
    status_path = (
        f"/integration/invoices/status?ownerAddress={OWNER.address}"
        f"&paymentAddress={payment_address}"
    )
    cases = {
        "trivial": ("GET", "/healthz", ["-"]),
        "create_api_key": (
            "POST",
            "/integration/invoices",
            [f"{json.dumps(body)}\tx-service-api-key\t{api_key}"],
        ),
        "status_api_key": ("GET", status_path, [f"-\tx-service-api-key\t{api_key}"]),
    }
    wrk_rps_across(base_urls, "GET", "/healthz", ["-"], args, workdir)  # warm-up
    for name, (method, path, lines) in cases.items():
        load = wrk_rps_across(base_urls, method, path, lines, args, workdir)
        print(
            f"api scale_out processes={len(base_urls)} case={name} rps={load.rps:.0f} "
            f"cpu_us={load.cpu_us:.0f}",
            flush=True,
        )


SERVER_PIDS: dict[str, int] = {}

WRK_SCRIPT = """
local lines = {}
local i = 0
local method, path, headers_file = "%s", "%s", "%s"
for line in io.lines(headers_file) do lines[#lines + 1] = line end
request = function()
  i = i + 1
  local fields = {}
  for field in string.gmatch(lines[((i - 1) %% #lines) + 1], "[^\t]+") do
    fields[#fields + 1] = field
  end
  local headers = {["content-type"] = "application/json"}
  for k = 2, #fields, 2 do headers[fields[k]] = fields[k + 1] end
  local body = nil
  if fields[1] ~= "-" then body = fields[1] end
  return wrk.format(method, path, headers, body)
end
local said = false
response = function(status, headers, body)
  if status >= 300 and not said then
    said = true
    io.write("first refused: " .. status .. " " .. body .. "\\n")
  end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%f\\n", summary.requests,
    summary.errors.status, summary.duration / 1e6))
end
"""


def wrk_rps(
    base_url: str, method: str, path: str, lines: list[str], args: argparse.Namespace, workdir: Path
) -> Load:
    """Requests per second that wrk completed; every request must have answered 2xx."""
    return wrk_rps_across([base_url], method, path, lines, args, workdir)


def wrk_rps_across(
    base_urls: list[str],
    method: str,
    path: str,
    lines: list[str],
    args: argparse.Namespace,
    workdir: Path,
) -> Load:
    """The same load on every URL at once (one wrk each, ``--concurrency`` split between
    them); the requests per second of all of them together, and the CPU time per request of
    the server processes whose pids are known (``SERVER_PIDS``)."""
    data = workdir / f"requests-{len(lines)}-{time.monotonic_ns()}.tsv"
    data.write_text("\n".join(lines) + "\n")
    script = workdir / "requests.lua"
    script.write_text(WRK_SCRIPT % (method, path, data))
    connections = max(1, args.concurrency // len(base_urls))
    command = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{args.seconds:g}s"]
    pids = [SERVER_PIDS[url] for url in base_urls if url in SERVER_PIDS]
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    runs = [
        subprocess.Popen([*command, "-s", str(script), base_url], stdout=subprocess.PIPE, text=True)
        for base_url in base_urls
    ]
    total = 0.0
    completed = 0
    for run in runs:
        output, _ = run.communicate()
        result = next(line for line in output.splitlines() if line.startswith("RESULT"))
        _, requests, errors, seconds = result.split()
        if int(errors):
            raise SystemExit(f"{path}: {errors} non-2xx answers\n{output}")
        total += int(requests) / float(seconds)
        completed += int(requests)
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    return Load(rps=total, cpu_us=cpu / max(1, completed) * 1e6)


def wait_ready(client: httpx.Client) -> None:
    """Poll /healthz until the server answers (up to about a minute)."""
    for _ in range(600):
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)


def run_cases(
    base_url: str, api_key: str, chain_id: int, args: argparse.Namespace, workdir: Path
) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        wait_ready(client)
        body = {"ownerAddress": OWNER.address, "chainId": chain_id, "amount": "1.5"}
        created = client.post(
            "/integration/invoices", json=body, headers={"x-service-api-key": api_key}
        )
        payment_address = created.json()["paymentAddress"]
        response_bytes = len(created.content)
    key_line = f"{json.dumps(body)}\tx-service-api-key\t{api_key}"
    signed_lines = [
        f"{json.dumps(signed_body)}\tx-service-signature\t{headers['x-service-signature']}"
        f"\tx-service-timestamp\t{headers['x-service-timestamp']}"
        for signed_body, headers in presigned(int(args.seconds * 4000) * args.rounds, chain_id)
    ]
    status_path = (
        f"/integration/invoices/status?ownerAddress={OWNER.address}"
        f"&paymentAddress={payment_address}"
    )
    get_line = f"-\tx-service-api-key\t{api_key}"

    wrk_rps(base_url, "GET", "/healthz", ["-"], args, workdir)  # warm-up
    before = wrk_rps(base_url, "GET", "/healthz", ["-"], args, workdir)
    print(f"api trivial rps={before.rps:.0f} cpu_us={before.cpu_us:.0f}")
    cases = {
        "create_api_key": ("POST", "/integration/invoices", [key_line]),
        "create_signature": ("POST", "/integration/invoices", signed_lines),
        "status_api_key": ("GET", status_path, [get_line]),
    }
    # Rounds of every case in turn, each bracketed by the trivial route (which cancels
    # drift); a case's line is its median round, as one round on a shared machine may be
    # slowed by a neighbour.
    rounds: dict[str, list[tuple[Load, Load]]] = {name: [] for name in cases}
    per_round = len(signed_lines) // args.rounds
    for round_ in range(args.rounds):
        for name, (method, path, lines) in cases.items():
            if name == "create_signature":  # a signed request is accepted once
                lines = lines[round_ * per_round : (round_ + 1) * per_round]
            load = wrk_rps(base_url, method, path, lines, args, workdir)
            after = wrk_rps(base_url, "GET", "/healthz", ["-"], args, workdir)
            trivial = Load(
                rps=(before.rps + after.rps) / 2, cpu_us=(before.cpu_us + after.cpu_us) / 2
            )
            rounds[name].append((load, trivial))
            before = after
    for name, measured in rounds.items():
        load, trivial = sorted(measured, key=lambda pair: pair[0].rps / pair[1].rps)[
            len(measured) // 2
        ]
        ratios = " ".join(f"{case.rps / base.rps:.2f}" for case, base in measured)
        print(
            f"api {name} rps={load.rps:.0f} trivial_rps={trivial.rps:.0f} "
            f"ratio={load.rps / trivial.rps:.2f} cpu_us={load.cpu_us:.0f} "
            f"trivial_cpu_us={trivial.cpu_us:.0f} rounds={ratios}"
        )
    framework_ceiling(key_line, response_bytes, args, workdir)


def framework_ceiling(
    line: str, response_bytes: int, args: argparse.Namespace, workdir: Path
) -> None:
    """The same load on a bare FastAPI app (``framework_app.py``) served by uvicorn the way
    ``invoicing serve`` serves: a POST with the create body and an answer of the same size,
    against its own trivial route. No create can beat this ratio."""
    port = free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "uvicorn"),
            "framework_app:app",
            "--port",
            str(port),
            "--app-dir",
            str(Path(__file__).parent),
        ],
        env={**os.environ, "BENCH_RESPONSE_BYTES": str(response_bytes)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}"
    SERVER_PIDS[base_url] = server.pid
    try:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            wait_ready(client)
        trivial = wrk_rps(base_url, "GET", "/healthz", ["-"], args, workdir)
        load = wrk_rps(base_url, "POST", "/echo", [line], args, workdir)
        print(
            f"api framework_post rps={load.rps:.0f} framework_trivial_rps={trivial.rps:.0f} "
            f"ratio={load.rps / trivial.rps:.2f} cpu_us={load.cpu_us:.0f} "
            f"framework_trivial_cpu_us={trivial.cpu_us:.0f}"
        )
    finally:
        SERVER_PIDS.pop(base_url, None)
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each case (median)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL server URL (the bench makes a fresh database on it); default SQLite",
    )
    parser.add_argument(
        "--processes",
        default=None,
        help="e.g. 1,2: run create and status over that many serve processes on one "
        "database, one after the other (the scale-out lines) instead of the usual cases",
    )
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.rounds, args.concurrency = 1.0, 1, 4
    bench(args)


if __name__ == "__main__":
    main()
