"""Factory events read from transaction receipts: ``Withdrawn`` (what a sweep moved) and
``NativeCredited`` (native coin a recipient refused, held by the factory for it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode

from invoicing.addresses import checksum_encode
from invoicing.chain.abi import event_data_types, event_topic
from invoicing.chain.artifacts import PAYMENT_FACTORY

WITHDRAWN_TOPIC = event_topic(PAYMENT_FACTORY, "Withdrawn")
_WITHDRAWN_DATA = event_data_types(PAYMENT_FACTORY, "Withdrawn")
NATIVE_CREDITED_TOPIC = event_topic(PAYMENT_FACTORY, "NativeCredited")


@dataclass(frozen=True)
class Withdrawn:
    """A factory ``Withdrawn`` event: ``total`` swept of ``token``, ``fee`` of it to payout."""

    owner: str
    token: str
    count: int
    total: int
    fee: int


def _hex_bytes(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    return bytes.fromhex(value[2:] if value.startswith("0x") else value)


def _topic_address(topic: bytes) -> str:
    if len(topic) != 32:
        raise ValueError(f"an address topic is 32 bytes, got {len(topic)}")
    return checksum_encode(topic[12:])


def decode_withdrawn(log: dict[str, Any]) -> Withdrawn | None:
    """The Withdrawn event in a receipt log, or None when the log is something else."""
    topics = [_hex_bytes(t) for t in log.get("topics", [])]
    if len(topics) != 3 or topics[0] != WITHDRAWN_TOPIC:
        return None
    count, total, fee = decode(_WITHDRAWN_DATA, _hex_bytes(log["data"]))
    return Withdrawn(
        owner=_topic_address(topics[1]),
        token=_topic_address(topics[2]),
        count=int(count),
        total=int(total),
        fee=int(fee),
    )


def native_credits(receipt: dict[str, Any], factory: str) -> list[tuple[str, int]]:
    """(account, amount) of each ``NativeCredited`` event of ``factory`` in a receipt: coin
    that account refused (or could not take within the send's gas stipend), held for it."""
    found = []
    for log in receipt.get("logs", []):
        if str(log.get("address", "")).lower() != factory.lower():
            continue
        topics = [_hex_bytes(t) for t in log.get("topics", [])]
        if len(topics) == 2 and topics[0] == NATIVE_CREDITED_TOPIC:
            (amount,) = decode(["uint256"], _hex_bytes(log["data"]))
            found.append((_topic_address(topics[1]), int(amount)))
    return found
