"""Transfers into escrows, as the node shows them: what the monitor records as an invoice's
payments (``monitor.records``).

- ERC-20: the token's ``Transfer`` logs whose ``to`` topic is one of the escrows
  (``eth_getLogs`` over a block range, one call per token).
- Native coin: every call that carried value to an escrow in one block, read from the
  node's traces, so coin a contract forwarded (an internal transfer) is found as well as a
  plain transaction's: ``trace_block`` (OpenEthereum style: erigon, reth, nethermind,
  anvil), else ``debug_traceBlockByNumber`` with the ``callTracer`` (geth), else the block's
  transactions alone (a node with no tracing: internal transfers go unrecorded).
  Calls that reverted, or sit under one that did, moved nothing and are left out.

Every answer is checked as a stranger's: a malformed entry is skipped, never trusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from invoicing.addresses import checksum_encode
from invoicing.chain.answers import RpcError
from invoicing.chain.evm import EvmClient
from invoicing.hashing import keccak256

TRANSFER_TOPIC = "0x" + keccak256(b"Transfer(address,address,uint256)").hex()
# JSON-RPC "method not found" (EIP-1474), and what nodes answer for a disabled namespace.
_UNSUPPORTED = (-32601, -32600, -32602)


@dataclass(frozen=True)
class Transfer:
    """One transfer into an escrow: ``source`` tells transfers of one transaction apart
    (``tx``, ``log:<index>``, ``trace:<trace address>``)."""

    to: str  # the escrow, checksummed
    tx_hash: str  # lowercase hex
    source: str
    sender: str  # checksummed
    amount_raw: int
    block_number: int
    block_hash: str  # lowercase hex


def _address(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) != 42 or not value.startswith("0x"):
        return None
    try:
        return checksum_encode(bytes.fromhex(value[2:]))
    except ValueError:
        return None


def _by_lower(escrows: set[str]) -> dict[str, str]:
    """The escrows by their lower-case text (a call's recipient is matched without computing
    its checksum: a block holds many calls, few to an escrow)."""
    return {escrow.lower(): escrow for escrow in escrows}


def _recipient(value: Any, wanted: dict[str, str]) -> str | None:
    """The escrow of ``wanted`` that ``value`` (an address as a node wrote it) names."""
    return wanted.get(value.lower()) if isinstance(value, str) and value[:2] == "0x" else None


def _topic_address(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) != 66 or not value.startswith("0x"):
        return None
    if value[2:26].strip("0"):
        return None
    return _address("0x" + value[26:])


def _quantity(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if not isinstance(value, str) or not value.startswith("0x") or len(value) > 66:
        return None
    try:
        return int(value, 16) if len(value) > 2 else 0
    except ValueError:
        return None


def _hash(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) != 66 or not value.startswith("0x"):
        return None
    try:
        bytes.fromhex(value[2:])
    except ValueError:
        return None
    return value.lower()


def topic_of(address: str) -> str:
    return "0x" + "00" * 12 + address[2:].lower()


def parse_transfer_log(log: Any, escrows: set[str]) -> Transfer | None:
    """A ``Transfer`` log to one of ``escrows`` (checksummed), or None for anything else."""
    if not isinstance(log, dict) or log.get("removed") is True:
        return None
    topics = log.get("topics")
    if not isinstance(topics, list) or len(topics) != 3 or topics[0] != TRANSFER_TOPIC:
        return None
    sender, to = _topic_address(topics[1]), _topic_address(topics[2])
    data = log.get("data")
    amount = _quantity(data) if isinstance(data, str) and len(data) == 66 else None
    tx_hash, block_hash = _hash(log.get("transactionHash")), _hash(log.get("blockHash"))
    number, index = _quantity(log.get("blockNumber")), _quantity(log.get("logIndex"))
    if sender is None or to not in escrows or amount is None or not amount:
        return None
    if tx_hash is None or block_hash is None or number is None or index is None:
        return None
    return Transfer(to, tx_hash, f"log:{index}", sender, amount, number, block_hash)


def parse_parity_traces(traces: Any, escrows: set[str], block_hash: str) -> list[Transfer]:
    """Value-carrying calls to ``escrows`` in a ``trace_block`` answer (the top-level call of
    a transaction included: its trace address is empty)."""
    if not isinstance(traces, list):
        return []
    wanted = _by_lower(escrows)
    failed: set[tuple[str, tuple[int, ...]]] = set()
    found = []
    for trace in traces:
        if not isinstance(trace, dict) or not isinstance(trace.get("action"), dict):
            continue
        tx_hash = _hash(trace.get("transactionHash"))
        path = trace.get("traceAddress")
        if (
            tx_hash is None
            or not isinstance(path, list)
            or not all(isinstance(step, int) for step in path)
        ):
            continue
        where = tuple(path)
        if trace.get("error") is not None:
            failed.add((tx_hash, where))
        if any((tx_hash, where[:depth]) in failed for depth in range(len(where) + 1)):
            continue
        action = trace["action"]
        if trace.get("type") != "call" or action.get("callType") not in ("call", None):
            continue
        to = _recipient(action.get("to"), wanted)
        if to is None:
            continue
        sender, value = _address(action.get("from")), _quantity(action.get("value"))
        number = _quantity(trace.get("blockNumber"))
        if sender is None or not value or number is None:
            continue
        source = "tx" if not where else "trace:" + ",".join(map(str, where))
        found.append(Transfer(to, tx_hash, source, sender, value, number, block_hash))
    return found


def parse_call_frames(
    frames: Any, escrows: set[str], number: int, block_hash: str
) -> list[Transfer]:
    """Value-carrying calls to ``escrows`` in a ``debug_traceBlockByNumber`` answer (the
    ``callTracer``'s frames, one tree per transaction)."""
    if not isinstance(frames, list):
        return []
    found: list[Transfer] = []
    for entry in frames:
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            continue
        tx_hash = _hash(entry.get("txHash"))
        if tx_hash is not None:
            _walk(entry["result"], (), tx_hash, _by_lower(escrows), number, block_hash, found)
    return found


def _walk(
    frame: dict[str, Any],
    where: tuple[int, ...],
    tx_hash: str,
    wanted: dict[str, str],
    number: int,
    block_hash: str,
    found: list[Transfer],
) -> None:
    if frame.get("error") is not None:
        return  # it and everything under it moved nothing
    to = _recipient(frame.get("to"), wanted)
    if to is not None and frame.get("type") == "CALL":
        sender, value = _address(frame.get("from")), _quantity(frame.get("value", "0x0"))
        if sender is not None and value:
            source = "tx" if not where else "trace:" + ",".join(map(str, where))
            found.append(Transfer(to, tx_hash, source, sender, value, number, block_hash))
    calls = frame.get("calls")
    for index, child in enumerate(calls if isinstance(calls, list) else []):
        if isinstance(child, dict):
            _walk(child, (*where, index), tx_hash, wanted, number, block_hash, found)


def parse_block_transactions(block: Any, escrows: set[str]) -> list[Transfer]:
    """Value-carrying transactions to ``escrows`` in a block with its full transactions."""
    if not isinstance(block, dict) or not isinstance(block.get("transactions"), list):
        return []
    block_hash, number = _hash(block.get("hash")), _quantity(block.get("number"))
    if block_hash is None or number is None:
        return []
    wanted = _by_lower(escrows)
    found = []
    for tx in block["transactions"]:
        if not isinstance(tx, dict):
            continue
        to = _recipient(tx.get("to"), wanted)
        if to is None:
            continue
        sender = _address(tx.get("from"))
        value, tx_hash = _quantity(tx.get("value")), _hash(tx.get("hash"))
        if sender is not None and value and tx_hash is not None:
            found.append(Transfer(to, tx_hash, "tx", sender, value, number, block_hash))
    return found


class TransferReader:
    """Reads transfers into escrows over one node connection; remembers which tracing
    method the node answers."""

    def __init__(self, evm: EvmClient) -> None:
        self.evm = evm
        self._tracing: list[str] = ["trace_block", "debug_traceBlockByNumber"]

    async def token_transfers(
        self, token: str, escrows: Sequence[str], from_block: int, to_block: int
    ) -> list[Transfer]:
        wanted = set(escrows)
        logs = await self.evm.call_rpc(
            "eth_getLogs",
            [
                {
                    "address": token,
                    "fromBlock": hex(from_block),
                    "toBlock": hex(to_block),
                    "topics": [TRANSFER_TOPIC, None, [topic_of(e) for e in sorted(wanted)]],
                }
            ],
        )
        found = (
            parse_transfer_log(log, wanted) for log in (logs if isinstance(logs, list) else [])
        )
        return [transfer for transfer in found if transfer is not None]

    async def native_transfers(self, escrows: Sequence[str], block: int) -> list[Transfer]:
        wanted = set(escrows)
        block_hash = await self.block_hash(block)
        if block_hash is None:
            return []
        while self._tracing:
            method = self._tracing[0]
            try:
                if method == "trace_block":
                    traces = await self.evm.call_rpc(method, [hex(block)])
                    return _in_block(parse_parity_traces(traces, wanted, block_hash), block)
                frames = await self.evm.call_rpc(method, [hex(block), {"tracer": "callTracer"}])
                return parse_call_frames(frames, wanted, block, block_hash)
            except RpcError as exc:
                if exc.code not in _UNSUPPORTED:
                    raise
                self._tracing.pop(0)  # this node does not offer it: the next one
        full = await self.evm.call_rpc("eth_getBlockByNumber", [hex(block), True])
        return parse_block_transactions(full, wanted)

    async def block_hash(self, block: int) -> str | None:
        """The hash of the block at ``block`` on the node's chain now (None: not there)."""
        header = await self.evm.call_rpc("eth_getBlockByNumber", [hex(block), False])
        return _hash(header.get("hash")) if isinstance(header, dict) else None


def _in_block(transfers: Iterable[Transfer], block: int) -> list[Transfer]:
    return [transfer for transfer in transfers if transfer.block_number == block]
