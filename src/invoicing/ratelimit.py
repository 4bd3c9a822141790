"""Fixed-window request counters in the database, so a limit holds across processes.

``hit`` counts one request against each of its keys in the window that holds ``now_ms``
and raises ``RateLimited`` (429, with ``Retry-After`` until the window ends) when a key is
over its limit. A key names who is counted and for what (``pay-ip:203.0.113.7``,
``api-owner:0xab…``); the window length is the caller's (a minute for requests, an hour for
API-key issuance, a day for a budget).

Concurrent hits of a process are counted together: one transaction adds each key's hits
with one upsert and reads the new totals back, so under load a request costs a share of a
batch (the hot create path pays for counting, not for a transaction). Every hit still gets
its own exact place in its window's count, across processes too: the database adds.

Rows of windows that are over are deleted by housekeeping (``purge_windows``), never on the
request path.

Public routes count per client address (``client_address``): the socket's peer, unless that
peer is a trusted reverse proxy (``INVOICING_TRUSTED_PROXIES``); then the right-most
``X-Forwarded-For`` address that is not itself a trusted proxy, so a client cannot choose
its own key by sending the header.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import BigInteger, Connection, Integer, String, Table, bindparam, delete
from sqlalchemy.orm import Mapped, mapped_column
from starlette.requests import HTTPConnection

from invoicing.coalescer import Coalescer
from invoicing.db import Base, Database, upsert
from invoicing.errors import RateLimited

WINDOW_MS = 60_000
HOUR_MS = 3_600_000
MAX_KEY_LENGTH = 120


class RateLimitWindow(Base):
    """Requests counted for one key in one fixed window."""

    __tablename__ = "rate_limit_windows"

    key: Mapped[str] = mapped_column(String(MAX_KEY_LENGTH), primary_key=True)
    window_start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    # The window's end: housekeeping deletes the rows of windows that are over.
    expires_at_ms: Mapped[int] = mapped_column(BigInteger, index=True)


async def hit(
    db: Database, keys: Sequence[str], limit: int, now_ms: int, window_ms: int = WINDOW_MS
) -> None:
    """Count one request against each key; 429 when any key is over ``limit`` per window.

    A ``limit`` of 0 or less turns the limit off (nothing is counted)."""
    if limit <= 0 or not keys:
        return
    start = now_ms - now_ms % window_ms
    end = start + window_ms
    counter = _counter(db)
    counts = await asyncio.gather(
        *(counter.submit((key[:MAX_KEY_LENGTH], start, end)) for key in keys)
    )
    if max(counts) > limit:
        retry_after_s = max(1, -(-(end - now_ms) // 1000))
        raise RateLimited(
            f"too many requests; at most {limit} per {_window_text(window_ms)}", retry_after_s
        )


def _window_text(window_ms: int) -> str:
    names = {WINDOW_MS: "minute", HOUR_MS: "hour", 24 * HOUR_MS: "day"}
    return names.get(window_ms, f"{window_ms // 1000} s")


async def purge_windows(db: Database, now_ms: int) -> int:
    """Delete the counters of windows that are over (housekeeping); returns how many."""
    async with db.transaction() as session:
        result = await session.execute(
            delete(RateLimitWindow).where(RateLimitWindow.expires_at_ms <= now_ms)
        )
    return int(getattr(result, "rowcount", 0) or 0)


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def trusted_networks(setting: str) -> tuple[IPNetwork, ...]:
    """The CIDRs of ``INVOICING_TRUSTED_PROXIES`` (comma-separated); ValueError if one is bad."""
    networks = []
    for part in setting.split(","):
        if part.strip():
            try:
                networks.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"INVOICING_TRUSTED_PROXIES: {part.strip()!r} is not a CIDR"
                ) from None
    return tuple(networks)


def _trusted(address: str, networks: tuple[IPNetwork, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def client_address(connection: HTTPConnection, trusted_proxies: str) -> str:
    """The address a public route counts its client by (see the module docstring)."""
    peer = connection.client.host if connection.client else "unknown"
    networks = trusted_networks(trusted_proxies)
    if not networks or not _trusted(peer, networks):
        return peer
    forwarded = ",".join(connection.headers.getlist("x-forwarded-for"))
    client = peer
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()]):
        if not _is_address(hop):
            break  # written by someone left of the proxies: keep the last trusted hop
        client = hop
        if not _trusted(hop, networks):
            break
    return client


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True


_Hit = tuple[str, int, int]  # key, window start, window end


def _counter(db: Database) -> Coalescer[_Hit, int]:
    return db.shared("ratelimit.counter", lambda: Coalescer(functools.partial(_count_hits, db)))


async def _count_hits(db: Database, hits: Sequence[_Hit]) -> list[int | Exception]:
    """Each hit's place in its window's count: the batch adds every key's hits at once."""
    added = Counter((key, start) for key, start, _end in hits)
    ends = {(key, start): end for key, start, end in hits}
    rows = [
        {"key": key, "window_start_ms": start, "count": n, "expires_at_ms": ends[(key, start)]}
        for (key, start), n in sorted(added.items())  # one lock order for every process
    ]
    totals = await db.run_batch(functools.partial(_add_counts, rows=rows))
    seen: Counter[tuple[str, int]] = Counter()
    places: list[int | Exception] = []
    for key, start, _end in hits:
        seen[(key, start)] += 1
        places.append(totals[(key, start)] - added[(key, start)] + seen[(key, start)])
    return places


def _add_counts(connection: Connection, rows: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    statement = _add_statement(connection.dialect.name)
    return {
        (row["key"], row["window_start_ms"]): int(connection.execute(statement, row).scalar_one())
        for row in rows
    }


@functools.cache
def _add_statement(dialect: str) -> Any:
    """The counting upsert, built once."""
    table = cast(Table, RateLimitWindow.__table__)
    statement = upsert(dialect, table).values(
        key=bindparam("key"),
        window_start_ms=bindparam("window_start_ms"),
        count=bindparam("count", type_=Integer),
        expires_at_ms=bindparam("expires_at_ms"),
    )
    return statement.on_conflict_do_update(
        index_elements=[table.c.key, table.c.window_start_ms],
        set_={"count": table.c.count + statement.excluded.count},
    ).returning(table.c.count)
