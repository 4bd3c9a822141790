"""Calls and events encoded from the shipped ABI.

A function is looked up by name in a compiled artifact's ABI (``chain.artifacts``) and
eth_abi encodes its arguments and decodes its answer, so a signature is never typed out a
second time. This is the one way the service and its tests build calldata for the cold
paths (owner settings, withdrawals, factory and ERC-20 views). The per-invoice hot paths
are written out by hand (``calldata.encode_balances_of``, ``escrows``) and pinned to this by
tests.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode, encode

from invoicing.addresses import normalize_address
from invoicing.chain.artifacts import load_artifact
from invoicing.hashing import keccak256


@dataclass(frozen=True)
class AbiFunction:
    """One function of a contract: its 4-byte selector and its argument and answer types."""

    name: str
    selector: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def encode(self, *args: Any) -> bytes:
        return self.selector + encode(list(self.inputs), list(args))

    def decode(self, data: bytes) -> Any:
        """The answer: one value, or a tuple for several; addresses come back checksummed."""
        values = [
            normalize_address(value) if kind == "address" else value
            for kind, value in zip(self.outputs, decode(list(self.outputs), data), strict=True)
        ]
        return values[0] if len(values) == 1 else tuple(values)


def selector(signature: str) -> bytes:
    """The 4-byte selector of a function or error signature, e.g. ``"Error(string)"``."""
    return keccak256(signature.encode())[:4]


def canonical_type(param: dict[str, Any]) -> str:
    """A parameter's type as signatures spell it (tuples written out from their components)."""
    kind = str(param["type"])
    if not kind.startswith("tuple"):
        return kind
    components = ",".join(canonical_type(c) for c in param["components"])
    return f"({components}){kind[len('tuple') :]}"


def input_types(entry: dict[str, Any]) -> tuple[str, ...]:
    return tuple(canonical_type(param) for param in entry["inputs"])


def signature(entry: dict[str, Any]) -> str:
    """``name(type,…)`` of an ABI function, event or error entry."""
    return f"{entry['name']}({','.join(input_types(entry))})"


def abi_entries(contract: str, kind: str) -> list[dict[str, Any]]:
    """The ABI entries of one kind (``function``, ``event``, ``error``) of an artifact."""
    return [entry for entry in load_artifact(contract).abi if entry["type"] == kind]


def _entry(contract: str, kind: str, name: str) -> dict[str, Any]:
    found = [entry for entry in abi_entries(contract, kind) if entry["name"] == name]
    if len(found) != 1:
        raise LookupError(f"{contract} has {len(found)} {kind}s named {name!r}")
    return found[0]


@functools.cache
def abi_function(contract: str, name: str) -> AbiFunction:
    """The function ``name`` of an artifact's ABI (it must not be overloaded)."""
    entry = _entry(contract, "function", name)
    outputs = tuple(canonical_type(param) for param in entry["outputs"])
    return AbiFunction(name, selector(signature(entry)), input_types(entry), outputs)


def encode_call(contract: str, name: str, *args: Any) -> bytes:
    """Calldata of ``contract.name(*args)``, e.g. ``encode_call(ERC20, "transfer", to, 5)``."""
    return abi_function(contract, name).encode(*args)


def decode_result(contract: str, name: str, data: bytes) -> Any:
    """The decoded answer of an ``eth_call`` of ``contract.name``."""
    return abi_function(contract, name).decode(data)


@functools.cache
def event_topic(contract: str, name: str) -> bytes:
    """topic0 of an event: keccak256 of its signature."""
    return keccak256(signature(_entry(contract, "event", name)).encode())


def event_data_types(contract: str, name: str) -> list[str]:
    """Types of an event's non-indexed fields, in the order its log data holds them."""
    entry = _entry(contract, "event", name)
    return [canonical_type(param) for param in entry["inputs"] if not param["indexed"]]
