"""A worker's pending watched invoices in memory: per shard and asset, each escrow's address
and the expiry before which a zero reading of it changes nothing.

A pending pass needs of an invoice only its escrow, its asset and whether a zero reading can
change it (``monitor.scan``: quiet until its expiry, or loud). Reading that from the database
on every pass cost the pass what the chain watches, not what changed; so the worker that
leases a shard keeps this much of it here, loads it once, and then applies only the
invoices that changed since (``monitor.changes``). The database stays the truth: a reading
that can change something is decided on the invoice's row, under its lock
(``monitor.check.store_balances``), never on what is held here.

An asset's escrows are held sorted by address in chunks of a few thousand (``AssetSet``):
the addresses packed, 20 bytes each, as the EscrowReader's calldata carries them
(``PackedAccounts``, copied into the call whole), the expiries in an array beside them. Ten
million escrows take about 400 MB, and an insert, an update or a removal moves at most one
chunk's bytes.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from invoicing.chain.calldata import PackedAccounts

# Entries per chunk after a load or a split; a chunk splits at twice as many.
CHUNK = 2048
# Bytes of an escrow's key: its address.
_SIZE = 20


def address_key(address: str) -> bytes:
    """An address's 20 bytes (the key of the set)."""
    return bytes.fromhex(address.removeprefix("0x"))


@dataclass
class Chunk:
    """Escrows sorted by address (packed), and their expiries."""

    packed: bytearray
    expires: array[int]

    def __len__(self) -> int:
        return len(self.expires)

    def find(self, key: bytes) -> tuple[int, bool]:
        """Where ``key`` is, or would be inserted, and whether it is there."""
        index = bisect.bisect_left(_Keys(self.packed), key)
        found = index < len(self) and self.packed[_SIZE * index : _SIZE * index + _SIZE] == key
        return index, found


class _Keys:
    """A chunk's keys as a sequence to bisect."""

    __slots__ = ("packed",)

    def __init__(self, packed: bytearray) -> None:
        self.packed = packed

    def __len__(self) -> int:
        return len(self.packed) // _SIZE

    def __getitem__(self, index: int) -> bytes:
        return bytes(self.packed[_SIZE * index : _SIZE * index + _SIZE])


class AssetSet:
    """One shard's pending escrows of one asset (``token``: None for the native coin)."""

    def __init__(self, token: str | None, chunk: int = CHUNK) -> None:
        self.token = token
        self.chunk = chunk
        self.chunks: list[Chunk] = []
        self._firsts: list[bytes] = []  # each chunk's first key, to find the chunk

    @classmethod
    def of(
        cls, token: str | None, addresses: list[str], expires: list[int], chunk: int = CHUNK
    ) -> AssetSet:
        """A set made from a load: ``addresses`` and their ``expires`` in any order."""
        keyed = sorted(zip([a.removeprefix("0x").lower() for a in addresses], expires, strict=True))
        made = cls(token, chunk)
        for start in range(0, len(keyed), chunk):
            part = keyed[start : start + chunk]
            packed = bytearray.fromhex("".join([key for key, _ in part]))
            made.chunks.append(Chunk(packed, array("q", [expiry for _, expiry in part])))
            made._firsts.append(bytes(packed[:_SIZE]))
        return made

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.expiry(key) is not None

    def expiry(self, key: bytes) -> int | None:
        """The expiry held for ``key``, or None when it is not held."""
        if not self.chunks:
            return None
        chunk = self.chunks[self._chunk_of(key)]
        index, found = chunk.find(key)
        return chunk.expires[index] if found else None

    def put(self, key: bytes, expiry: int) -> None:
        """Hold ``key`` with ``expiry`` (added, or its expiry replaced)."""
        if not self.chunks:
            self.chunks.append(Chunk(bytearray(key), array("q", [expiry])))
            self._firsts.append(key)
            return
        at = self._chunk_of(key)
        chunk = self.chunks[at]
        index, found = chunk.find(key)
        if found:
            chunk.expires[index] = expiry
            return
        chunk.packed[_SIZE * index : _SIZE * index] = key
        chunk.expires.insert(index, expiry)
        if index == 0:
            self._firsts[at] = key
        if len(chunk) >= 2 * self.chunk:
            half = len(chunk) // 2
            upper = Chunk(chunk.packed[_SIZE * half :], chunk.expires[half:])
            del chunk.packed[_SIZE * half :], chunk.expires[half:]
            self.chunks.insert(at + 1, upper)
            self._firsts.insert(at + 1, bytes(upper.packed[:_SIZE]))

    def drop(self, key: bytes) -> bool:
        """Stop holding ``key``; whether it was held."""
        if not self.chunks:
            return False
        at = self._chunk_of(key)
        chunk = self.chunks[at]
        index, found = chunk.find(key)
        if not found:
            return False
        del chunk.packed[_SIZE * index : _SIZE * index + _SIZE], chunk.expires[index]
        if not len(chunk):
            del self.chunks[at], self._firsts[at]
        elif index == 0:
            self._firsts[at] = bytes(chunk.packed[:_SIZE])
        return True

    def _chunk_of(self, key: bytes) -> int:
        return max(0, bisect.bisect_right(self._firsts, key) - 1)


@dataclass
class ShardSet:
    """One shard's pending watched escrows, by asset."""

    assets: dict[str | None, AssetSet] = field(default_factory=dict)

    def put(self, token: str | None, address: str, expiry: int) -> None:
        """Hold an escrow (an invoice's asset never changes)."""
        self.assets.setdefault(token, AssetSet(token)).put(address_key(address), expiry)

    def drop(self, token: str | None, address: str) -> None:
        held = self.assets.get(token)
        if held is not None:
            held.drop(address_key(address))

    def __len__(self) -> int:
        return sum(len(held) for held in self.assets.values())

    def pieces(self) -> Iterator[tuple[str | None, PackedAccounts, array[int]]]:
        """Every chunk of every asset: the token, the escrows and their expiries."""
        for token, held in self.assets.items():
            for chunk in held.chunks:
                yield token, PackedAccounts(chunk.packed), chunk.expires
