"""QR codes as small, self-contained SVG documents rendered on the server.

Encoding one takes ~20 ms of pure Python, so the payment page never does it on the event
loop: ``QrCache`` renders in a worker thread (at most ``MAX_RENDERS`` at once) and keeps the
latest SVG of each invoice (a bounded LRU keyed by paymentAddress; an entry is replaced when
the invoice's URI changes, after a partial payment). Concurrent requests for the same code
share one rendering. The page route looks the invoice up first, so an unknown
paymentAddress costs no QR work at all.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

import qrcode
import qrcode.constants

QUIET_ZONE_MODULES = 4


def qr_svg(text: str, title: str = "QR code") -> str:
    """An SVG QR code of ``text``: black modules on a white square, one path per row run,
    scaled by the viewBox so it stays sharp at any size."""
    code = qrcode.QRCode(
        error_correction=qrcode.constants.ERROR_CORRECT_M, border=QUIET_ZONE_MODULES
    )
    code.add_data(text)
    code.make(fit=True)
    matrix: list[list[bool]] = code.get_matrix()
    size = len(matrix)
    runs = []
    for y, row in enumerate(matrix):
        x = 0
        while x < size:
            if not row[x]:
                x += 1
                continue
            start = x
            while x < size and row[x]:
                x += 1
            runs.append(f"M{start} {y}h{x - start}v1h-{x - start}z")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" '
        f'width="{size * 8}" height="{size * 8}" shape-rendering="crispEdges" role="img">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{size}" height="{size}" fill="#fff"/>'
        f'<path fill="#000" d="{"".join(runs)}"/></svg>'
    )


Renderer = Callable[[str, str], str]


@dataclass
class QrStats:
    hits: int = 0
    renders: int = 0


@dataclass
class QrCache:
    """The latest QR code of each invoice, rendered off the event loop (see module doc).

    ``render`` is the seam: ``qr_svg`` by default; a test may pass a counting wrapper."""

    render: Renderer = qr_svg
    max_entries: int = 2048
    stats: QrStats = field(default_factory=QrStats)
    _entries: OrderedDict[str, tuple[tuple[str, str], asyncio.Task[str]]] = field(
        default_factory=OrderedDict
    )
    _renders: asyncio.Semaphore | None = None

    MAX_RENDERS = 2

    async def svg(self, payment_address: str, text: str, title: str) -> str:
        """The SVG of ``text`` for this invoice: cached, or rendered in a worker thread."""
        wanted = (text, title)
        entry = self._entries.get(payment_address)
        if entry is not None and entry[0] == wanted and not _failed(entry[1]):
            self._entries.move_to_end(payment_address)
            self.stats.hits += 1
            return await asyncio.shield(entry[1])
        # A task of its own: a requester that goes away does not cancel the others' code.
        task = asyncio.create_task(self._render(text, title))
        task.add_done_callback(_retrieve)
        self._entries[payment_address] = (wanted, task)
        self._entries.move_to_end(payment_address)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return await asyncio.shield(task)

    async def _render(self, text: str, title: str) -> str:
        if self._renders is None:
            self._renders = asyncio.Semaphore(self.MAX_RENDERS)
        async with self._renders:
            self.stats.renders += 1
            return await asyncio.to_thread(self.render, text, title)


def _failed(task: asyncio.Task[str]) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


def _retrieve(task: asyncio.Task[str]) -> None:
    """Mark a failure as seen (the next request renders again)."""
    if not task.cancelled():
        task.exception()
