"""Monitor: one pass over N watched invoices, against one eth_getBalance per invoice.

Starts its own anvil and deploys the dev contracts, and starts a minimal JSON-RPC node in a
process of its own that answers the reads from memory (``memory_node.py``; with
``--node-in-process`` in this process, as the bench did before). For each size and
node it inserts N pending invoices (80% native, 20% TUSD; a few of them funded) into a
fresh database, then times the two passes of the monitor over all of them: the block pass
(every pending invoice read at one block, only changes written: what runs on every new
head) and the due pass (the same reads once the interval has passed with the head standing
still: what keeps the 20 s guarantee; it writes nothing for the unchanged invoices, only
one record per shard). In the same run it times the naive alternative on that node: one
``eth_getBalance`` per invoice (64 in flight; a token invoice gets one ``balanceOf``
eth_call instead). Prints one line per pass, size and node::

    monitor db=postgresql node=memory kind=due n=100000 pass_s=2.91 cpu_s=0.9 rpc_calls=12
        rss_mb=170 checked=99990 paid=0 baseline_s=380.1 ...

``node=anvil`` includes the node's EVM work;
``node=memory`` is the service's own time. ``cpu_s`` is this process's CPU time in the pass:
the service's alone when the memory node runs in its own process (``node_proc=own``, the
default), and then ``node_cpu_s`` is all of the node process's CPU time in the pass (its HTTP
server's and its handler's), not part of ``cpu_s``; with ``--node-in-process``
(``node_proc=in``) ``cpu_s`` includes the node's, and ``node_cpu_s`` is its handler's share
of it (its HTTP server's not counted). ``rss_mb`` is this process's peak resident memory.
The block pass runs first and finds the funded invoices paid; the due pass then checks the
rest (``checked`` says how many). Before them a ``kind=load`` line times what a worker does
once, at its first pass: load its shards' watched set (``monitor.changes``; ``checked`` is how many
escrows it holds); each pass then reads only what changed since. Above ``--baseline-max``
invoices the baseline is timed on that many and scaled linearly (the line then says
``baseline_measured=<count>``). Exits 1 when a pass misses a goal: at most 500 MB (1 GB at
10M); at 100k at most 20 RPC calls (and 5 s on the memory node); at 1M at most 150
calls (and 12 s, one Ethereum block, on the memory node); at 10M at most 1,000 calls
(and 3 s on the memory node).

``--keep`` keeps each size's seeded database (``bench_monitor_keep_<n>``, or a file of that
name in the temporary directory on SQLite) and reuses it on the next run with ``--keep``
(its funded invoices set back to pending): seeding 10,000,000 rows takes minutes. Drop it
by hand when done (``DROP DATABASE bench_monitor_keep_10000000``).

Rows are seeded in bulk: one executemany per 5,000 on SQLite; on PostgreSQL one
``INSERT ... SELECT generate_series`` on the server with the secondary indexes dropped and
rebuilt after (a million rows in about a minute).

    .venv/bin/python bench/monitor.py [--sizes 10000,100000] [--million]
        [--nodes anvil,memory] [--baseline-max 20000]
        [--database-url postgresql://postgres@127.0.0.1:5432/postgres] [--keep]
        [--node-in-process] [--readers EscrowReaderV1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, func, insert, select, text, update
from sqlalchemy.engine import make_url

from invoicing.addresses import checksum_encode, normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.clock import SystemClock
from invoicing.migrate import upgrade
from invoicing.monitor.changes import refresh, watched_of
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import ALL_SHARDS, PassResult, run_block_pass, run_due_pass
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.tables.monitor import MonitorShard

sys.path.insert(0, str(Path(__file__).parent))
from memory_node import READERS, MemoryNode, MemoryNodeProcess  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

PAYER_KEY = DEV_PRIVATE_KEYS[4]
FUNDED = 10
# (invoices, most RPC calls, most seconds) per goal.
GOALS = {100_000: (20, 5.0), 1_000_000: (150, 12.0), 10_000_000: (1000, 3.0)}
GOAL_RSS_MB = 500
GOAL_RSS_MB_10M = 1024
# Seeded invoices expire this long after seeding (a kept database stays pending for a month).
SEEDED_LIFE_MS = 30 * 86_400_000
BASELINE_IN_FLIGHT = 64
SEED_CHUNK = 5000


def invoice_row(
    i: int, owner: str, chain_id: int, token: str, now_ms: int, token_every: int = 5
) -> dict[str, Any]:
    """Invoice ``i`` (1-based): every ``token_every``-th one is a TUSD invoice (0: none)."""
    is_token = token_every > 0 and i % token_every == 0
    return {
        "id": str(uuid.uuid4()),
        "owner_address": owner,
        "owner_key": owner.lower(),
        "chain_id": chain_id,
        "invoice_id": str(i),
        "payment_address": checksum_encode(os.urandom(20)),
        "salt": "0x" + os.urandom(32).hex(),
        "amount": "1",
        "token_address": token if is_token else None,
        "decimals": 6 if is_token else 18,
        "required_raw": str(10**6 if is_token else 10**18),
        "expires_at": now_ms + SEEDED_LIFE_MS,
        "status": "pending",
        "paid": False,
        "withdrawn": False,
        "balance_raw": "0",
        "last_checked_at": now_ms,
        "created_at": now_ms,
        "updated_at": now_ms,
        "auth_mode": "api_key",
        "request_hash": "0" * 64,
        "watch": True,
        "swept_raw": "0",
        "lifetime_check_at": now_ms + SEEDED_LIFE_MS,
    }


# The same rows made on the PostgreSQL server: addresses from md5 of the row number (distinct,
# unfunded), every ``token_every``-th one a TUSD invoice.
PG_SEED = text(
    """
    INSERT INTO invoices (id, owner_address, owner_key, chain_id, invoice_id, payment_address,
        salt, amount, token_address, decimals, required_raw, expires_at, status, paid,
        withdrawn, balance_raw, last_checked_at, created_at, updated_at, auth_mode,
        request_hash, watch, swept_raw, lifetime_check_at, has_extras, shard)
    SELECT uid, :owner, lower(:owner), :chain_id, i::text,
        '0x' || substr(md5(i::text || :tag || 'a') || md5(i::text || :tag || 'b'), 1, 40),
        '0x' || md5(i::text || :tag || 'c') || md5(i::text || :tag || 'd'), '1',
        CASE WHEN i % :token_every = 0 THEN :token END,
        CASE WHEN i % :token_every = 0 THEN 6 ELSE 18 END,
        CASE WHEN i % :token_every = 0 THEN '1000000' ELSE '1000000000000000000' END,
        :expires_at, 'pending', false, false, '0', :now_ms, :now_ms, :now_ms, 'api_key',
        repeat('0', 64), true, '0', :expires_at, false,
        ('x' || substr(uid, 35, 2))::bit(8)::int % 64
    FROM (SELECT i, gen_random_uuid()::text AS uid FROM generate_series(1, :n) AS i) AS rows
    """
)
# Secondary indexes of invoices that back no constraint: dropped for the seed, rebuilt after.
PG_PLAIN_INDEXES = text(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'invoices' AND indexname "
    "NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'invoices'::regclass)"
)


def seed_postgres(
    url: str, n: int, chain_id: int, token: str, now_ms: int, token_every: int
) -> None:
    engine = create_engine(make_url(url).set(drivername="postgresql+psycopg2"))
    owner = checksum_encode(os.urandom(20))
    values = {
        "owner": owner,
        "chain_id": chain_id,
        "token": token,
        "n": n,
        "now_ms": now_ms,
        # Escrow addresses are made from the row number and this: one per chain.
        "tag": "" if chain_id == 31337 else str(chain_id),
        # n + 1: no row number is a multiple of it, so no token invoice.
        "token_every": token_every or n + 1,
    }
    with engine.begin() as connection:
        indexes = list(connection.execute(PG_PLAIN_INDEXES))
        for name, _definition in indexes:
            connection.execute(text(f'DROP INDEX "{name}"'))
        connection.execute(PG_SEED, {**values, "expires_at": now_ms + SEEDED_LIFE_MS})
        for _name, definition in indexes:
            connection.execute(text(definition))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE invoices"))
    engine.dispose()


async def seed(
    services: Services, url: str, n: int, dev: DevDeployment, token_every: int = 5
) -> list[FundedRow]:
    """N pending invoices, all due now; answers the first ``FUNDED`` of them (to be paid)."""
    now_ms = services.clock.now_ms()
    if url.startswith("postgresql"):
        seed_postgres(url, n, dev.chain_id, dev.token, now_ms, token_every)
    else:
        owner = checksum_encode(os.urandom(20))
        async with services.db.transaction() as session:
            connection = await session.connection()
            for start in range(0, n, SEED_CHUNK):
                rows = [
                    invoice_row(i, owner, dev.chain_id, dev.token, now_ms, token_every)
                    for i in range(start + 1, min(n, start + SEED_CHUNK) + 1)
                ]
                await connection.execute(insert(Invoice), rows)
    wanted = [str(i) for i in range(1, FUNDED + 1)]
    async with services.db.sessions() as session:
        funded = await session.execute(
            select(Invoice.payment_address, Invoice.token_address).where(
                Invoice.chain_id == dev.chain_id, Invoice.invoice_id.in_(wanted)
            )
        )
        return [FundedRow(*row) for row in funded]


@dataclass(frozen=True)
class FundedRow:
    payment_address: str
    token_address: str | None


async def fund(evm: EvmClient, rows: list[FundedRow]) -> None:
    for row in rows:
        if row.token_address is None:
            await evm.transact(PAYER_KEY, normalize_address(row.payment_address), value=10**18)
        else:
            address = normalize_address(row.payment_address)
            data = encode_call(TEST_TOKEN, "transfer", address, 10**6)
            await evm.transact(PAYER_KEY, row.token_address, data)


async def baseline(evm: EvmClient, rows: list[FundedRow], block: int) -> tuple[float, int]:
    """One eth_getBalance (native) or balanceOf eth_call (token) per invoice."""
    gate = asyncio.Semaphore(BASELINE_IN_FLIGHT)
    calls_before = evm.rpc.calls

    async def one(row: FundedRow) -> None:
        address = normalize_address(row.payment_address)
        async with gate:
            if row.token_address is None:
                await evm.get_balance(address, block)
            else:
                await evm.eth_call(
                    row.token_address, encode_call(ERC20, "balanceOf", address), block
                )

    started = time.perf_counter()
    await asyncio.gather(*(one(row) for row in rows))
    return time.perf_counter() - started, evm.rpc.calls - calls_before


async def baseline_sample(services: Services, chain_id: int, limit: int) -> list[FundedRow]:
    async with services.db.sessions() as session:
        rows = await session.execute(
            select(Invoice.payment_address, Invoice.token_address)
            .where(Invoice.chain_id == chain_id)
            .limit(limit)
        )
        return [FundedRow(*row) for row in rows]


def fresh_database(server: str | None, kept: str | None = None) -> tuple[str, Callable[[], None]]:
    """A new SQLite file, or a new database on the PostgreSQL server at ``server``; with
    ``kept`` the database of that name, made if missing and left in place."""
    if server is None:
        if kept is not None:
            return f"sqlite+aiosqlite:///{tempfile.gettempdir()}/{kept}.db", lambda: None
        path = f"{tempfile.mkdtemp(prefix='bench-monitor-')}/b.db"
        return f"sqlite+aiosqlite:///{path}", lambda: None
    admin = create_engine(
        make_url(server).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    name = kept or f"bench_monitor_{uuid.uuid4().hex[:10]}"
    with admin.connect() as connection:
        found = connection.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        if not found:
            connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        if kept is None:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    url = make_url(server).set(drivername="postgresql+asyncpg", database=name)
    return url.render_as_string(hide_password=False), drop


async def measure(
    n: int, node: Node, dev: DevDeployment, baseline_max: int, server: str | None, keep: bool
) -> bool:
    url, drop = fresh_database(server, f"bench_monitor_keep_{n}" if keep else None)
    try:
        return await _measure(n, node, dev, baseline_max, url)
    finally:
        drop()


async def reuse(services: Services, n: int, dev: DevDeployment) -> list[FundedRow] | None:
    """The funded rows of a kept database seeded with ``n`` invoices, back to pending
    (a previous run found them paid); None when it holds another number of rows."""
    async with services.db.transaction() as session:
        count = await session.scalar(
            select(func.count()).select_from(Invoice).where(Invoice.chain_id == dev.chain_id)
        )
        if count != n:
            await session.execute(delete(Invoice))
            return None
        # The last run's passes are not this one's: every shard is due.
        await session.execute(update(MonitorShard).values(pending_at=0, expired_at=0))
        wanted = [str(i) for i in range(1, FUNDED + 1)]
        await session.execute(
            update(Invoice)
            .where(Invoice.chain_id == dev.chain_id, Invoice.invoice_id.in_(wanted))
            .values(
                status="pending",
                paid=False,
                paid_at=None,
                balance_raw="0",
                # A reading from a run on another node (the memory node's block 100) would
                # hold back anvil's lower blocks.
                balance_block=0,
                watch=True,
            )
        )
        funded = await session.execute(
            select(Invoice.payment_address, Invoice.token_address).where(
                Invoice.chain_id == dev.chain_id, Invoice.invoice_id.in_(wanted)
            )
        )
        return [FundedRow(*row) for row in funded]


class ShiftedClock(SystemClock):
    """The system clock moved on by ``shift_ms``: the due pass finds the shards due."""

    def __init__(self) -> None:
        self.shift_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.shift_ms


@dataclass(frozen=True)
class Node:
    """Where the passes read: anvil, or the memory node answering from memory."""

    name: str
    url: str
    memory: MemoryNode | MemoryNodeProcess | None = None


@dataclass(frozen=True)
class Timed:
    kind: str
    seconds: float
    cpu_s: float
    node_cpu_s: float
    calls: int
    rss_mb: float
    result: PassResult


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def timed(
    kind: str,
    gateway: EvmGateway,
    run: Callable[[], Awaitable[PassResult]],
    memory: MemoryNode | MemoryNodeProcess | None = None,
) -> Timed:
    """Run a pass: its wall time, RPC calls and the process's peak resident memory (and
    the memory node's CPU time: its process's, or its handler's when it runs in this one)."""
    calls_before = gateway.evm.rpc.calls
    node_before = memory.cpu_s if memory else 0.0
    peak = rss_mb()
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb())
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    started, cpu_started = time.perf_counter(), time.process_time()
    result = await run()
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    done.set()
    await sampler
    peak = max(peak, rss_mb())
    node_cpu_s = (memory.cpu_s if memory else 0.0) - node_before
    calls = gateway.evm.rpc.calls - calls_before
    return Timed(kind, seconds, cpu_s, node_cpu_s, calls, peak, result)


async def _measure(n: int, node: Node, dev: DevDeployment, baseline_max: int, url: str) -> bool:
    await upgrade(url)
    chain = ChainConfig(chain_id=dev.chain_id, name="anvil", rpc_url=node.url, factory=dev.factory)
    clock = ShiftedClock()
    services = build_services(
        Settings(environment="development", database_url=url, chains=[chain], run_workers=False),
        clock,
    )
    gateway = services.chains.all()[0]
    assert isinstance(gateway, EvmGateway)
    try:
        started = time.perf_counter()
        funded = await reuse(services, n, dev)
        if funded is None:
            funded = await seed(services, url, n, dev)
        seed_s = time.perf_counter() - started
        if node.memory is None:
            await fund(gateway.evm, funded)
        else:
            for row in funded:
                value = 10**18 if row.token_address is None else 10**6
                await node.memory.fund(row.token_address, row.payment_address, value)
        block = await confirmed_block(gateway)
        sample = await baseline_sample(services, dev.chain_id, baseline_max)
        base_s, base_calls = await baseline(gateway.evm, sample, block)
        if len(sample) < n:
            base_s, base_calls = base_s * n / len(sample), n
        db = url.split(":")[0].split("+")[0]
        proc = "in" if isinstance(node.memory, MemoryNode) else "own"
        line = Line(db, node.name, n, base_s, base_calls, len(sample), seed_s, proc)

        # The worker loads its shards once, at its first pass: timed apart.
        memory = node.memory
        load = await timed("load", gateway, lambda: load_shards(services, dev.chain_id), memory)
        line.print(load)
        block_pass = await timed(
            "block", gateway, lambda: run_block_pass(services, gateway, block), memory
        )
        ok = line.print(block_pass)
        if (block_pass.result.checked, block_pass.result.paid) != (n, FUNDED):
            print(f"monitor n={n} FAILED: block pass {block_pass.result}")
            return False
        # The due pass reads what no pass read within the interval: the head stood still.
        clock.shift_ms += int(services.settings.monitor_interval_s * 1000)
        due_pass = await timed(
            "due", gateway, lambda: run_due_pass(services, gateway, block), memory
        )
        ok = line.print(due_pass) and ok
        if due_pass.result.checked != n - FUNDED:
            print(f"monitor n={n} FAILED: due pass checked {due_pass.result.checked}")
            return False
        return ok
    finally:
        await services.aclose()


async def load_shards(services: Services, chain_id: int) -> PassResult:
    """What a worker does at its first pass before it reads: load its shards' watched set."""
    watched = watched_of(services.db, chain_id)
    async with watched.lock:
        await refresh(services.db, watched, ALL_SHARDS, ALL_SHARDS)
    held = sum(len(shard) for shard in watched.shards.values())
    return PassResult(block=0, checked=held)


@dataclass(frozen=True)
class Line:
    db: str
    node: str
    n: int
    base_s: float
    base_calls: int
    measured: int
    seed_s: float
    node_proc: str

    def print(self, run: Timed) -> bool:
        """Print the pass's line; whether it met its goals: RPC calls and memory on every
        node, time on the memory node (anvil's EVM time is the node's, not ours)."""
        measured = f" baseline_measured={self.measured}" if self.measured < self.n else ""
        print(
            f"monitor db={self.db} node={self.node} kind={run.kind} n={self.n} "
            f"pass_s={run.seconds:.2f} cpu_s={run.cpu_s:.2f} node_cpu_s={run.node_cpu_s:.2f} "
            f"node_proc={self.node_proc} "
            f"rpc_calls={run.calls} "
            f"rss_mb={run.rss_mb:.0f} "
            f"checked={run.result.checked} paid={run.result.paid} "
            f"baseline_s={self.base_s:.2f} baseline_calls={self.base_calls} "
            f"speedup={self.base_s / run.seconds:.1f}x "
            f"calls_ratio={run.calls / self.base_calls:.5f} seed_s={self.seed_s:.1f}{measured}",
            flush=True,
        )
        if run.kind == "load":
            return True
        goal_calls, goal_s = GOALS.get(self.n, (self.base_calls, float("inf")))
        on_time = self.node != "memory" or run.seconds <= goal_s
        rss_goal = GOAL_RSS_MB_10M if self.n >= 10_000_000 else GOAL_RSS_MB
        return run.calls <= goal_calls and run.rss_mb <= rss_goal and on_time


async def run(
    sizes: list[int],
    nodes: list[str],
    baseline_max: int,
    server: str | None,
    keep: bool,
    in_process: bool = False,
    readers: tuple[str, ...] = READERS,
) -> bool:
    ok = True
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        await evm.aclose()
        kind = MemoryNode if in_process else MemoryNodeProcess
        async with kind(dev.chain_id, dev.factory, readers=readers) as memory:
            choices = {
                "anvil": Node("anvil", anvil.url),
                "memory": Node("memory", memory.url, memory),
            }
            for n in sizes:
                for name in nodes:
                    ok = await measure(n, choices[name], dev, baseline_max, server, keep) and ok
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument(
        "--million", action="store_true", help="also 1,000,000 invoices (minutes of seeding)"
    )
    parser.add_argument("--nodes", default="anvil,memory", help="anvil, memory or both")
    parser.add_argument("--baseline-max", type=int, default=20_000)
    parser.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL server URL (a fresh database is made on it per size); "
        "default: a fresh SQLite file per size",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep each size's seeded database (bench_monitor_keep_<n>) and reuse it next time",
    )
    parser.add_argument(
        "--node-in-process",
        action="store_true",
        help="run the memory node in this process (its CPU then counts in cpu_s)",
    )
    parser.add_argument(
        "--readers",
        default=",".join(READERS),
        help="the EscrowReader versions the memory node holds (EscrowReaderV1 alone: a chain "
        "deployed before version 2)",
    )
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.million, args.baseline_max = "50", False, 50
    sizes = [int(s) for s in args.sizes.split(",")] + ([1_000_000] if args.million else [])
    nodes = args.nodes.split(",")
    met = asyncio.run(
        run(
            sizes,
            nodes,
            args.baseline_max,
            args.database_url,
            args.keep,
            args.node_in_process,
            tuple(args.readers.split(",")),
        )
    )
    sys.exit(0 if met or args.smoke else 1)


if __name__ == "__main__":
    main()
