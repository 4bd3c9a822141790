"""The chain and token registry shipped with the service (``registry/chains.toml``).

It holds, per chain id, what an operator would otherwise look up and type: the network's
name, native coin, default confirmations, explorer, fee type, the allow-listed stablecoins
(with the currency each is pegged to) and the Chainlink feeds pricing the native coin, each
value citing its official source in the file. A chains file entry is merged over its
chain's registry entry (:func:`merged_entry`): the file's keys win, and a file that lists
tokens replaces the registry's allow-list. ``INVOICING_REGISTRY_FILE`` points at another
registry (tests, or an operator's reviewed copy).
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

REGISTRY_RESOURCE = "chains.toml"


def registry_text(path: Path | None = None) -> str:
    """The registry's TOML text: the shipped file, or ``path``."""
    if path is None:
        return files("invoicing.registry").joinpath(REGISTRY_RESOURCE).read_text("utf-8")
    try:
        return path.read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"registry {path}: {exc.strerror}") from None


@cache
def _parsed(path: Path | None) -> dict[int, dict[str, Any]]:
    try:
        data = tomllib.loads(registry_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"registry {path or REGISTRY_RESOURCE}: {exc}") from None
    entries: dict[int, dict[str, Any]] = {}
    for entry in data.get("chain", []):
        chain_id = int(entry["chain_id"])
        if chain_id in entries:
            raise ValueError(f"registry {path or REGISTRY_RESOURCE}: chain {chain_id} twice")
        entries[chain_id] = entry
    return entries


def registry(path: Path | None = None) -> dict[int, dict[str, Any]]:
    """Registry entries by chain id (chains-file keys; copies, safe to change)."""
    return {chain_id: _copy(entry) for chain_id, entry in _parsed(path).items()}


def merged_entry(entry: dict[str, Any], path: Path | None = None) -> dict[str, Any]:
    """A chains-file ``entry`` over its chain's registry entry: the file's keys win, and its
    ``token`` list (when given) replaces the registry's. A chain the registry does not know
    is returned as it is."""
    try:
        chain_id = int(entry["chain_id"])
    except (KeyError, TypeError, ValueError):
        return entry  # the chains-file parser names the bad or missing chain_id
    return {**registry(path).get(chain_id, {}), **entry}


def _copy(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        **entry,
        "token": [dict(token) for token in entry.get("token", [])],
        "feed": [dict(feed) for feed in entry.get("feed", [])],
    }
