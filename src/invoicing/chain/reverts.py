"""Revert data decoded into the contracts' custom errors (names from the shipped ABIs)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode
from eth_abi.exceptions import DecodingError

from invoicing.chain.abi import abi_entries, input_types, selector, signature
from invoicing.chain.artifacts import PAYMENT_FACTORY, SUBSCRIPTIONS, TEST_TOKEN


@dataclass(frozen=True)
class RevertReason:
    """A decoded revert: the custom error's name (or Error/Panic) and its arguments."""

    name: str
    args: tuple[Any, ...]


@functools.cache
def _known_errors() -> dict[bytes, tuple[str, list[str]]]:
    errors: dict[bytes, tuple[str, list[str]]] = {
        selector("Error(string)"): ("Error", ["string"]),
        selector("Panic(uint256)"): ("Panic", ["uint256"]),
    }
    for contract in (PAYMENT_FACTORY, TEST_TOKEN, SUBSCRIPTIONS):
        for entry in abi_entries(contract, "error"):
            errors[selector(signature(entry))] = (entry["name"], list(input_types(entry)))
    return errors


def decode_revert(data: bytes) -> RevertReason | None:
    """Name and arguments of a factory (or ERC-20) custom error in revert data, if known."""
    known = _known_errors().get(data[:4])
    if known is None:
        return None
    name, types = known
    try:
        args = decode(types, data[4:])
    except DecodingError:  # malformed revert data is simply not recognised
        return None
    return RevertReason(name, tuple(args))


def revert_name(data: bytes) -> str | None:
    """Just the error name, e.g. ``"InvalidAccountNonce"``; None for unknown revert data."""
    reason = decode_revert(data)
    return reason.name if reason else None
