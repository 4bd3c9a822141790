"""The chains file: ``[[chain]]`` TOML tables, each merged over its chain's registry entry,
read into ``ChainConfig`` values (``INVOICING_CHAINS_FILE``).

Relayer keys are given as references (``env:NAME``, ``file:PATH``) and resolved here; an
inline key is refused outside development, and no error shows a key.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from invoicing.chain.config import (
    DEFAULT_HEARTBEAT_S,
    ChainConfig,
    Eip712Domain,
    FeedConfig,
    TokenConfig,
)
from invoicing.chain.deploy import factory_address
from invoicing.chain.versions import DEFAULT_PREVIOUS_FACTORIES
from invoicing.registry import merged_entry


def load_chains_file(
    path: Path, *, allow_inline_keys: bool = False, registry_file: Path | None = None
) -> list[ChainConfig]:
    """Parse a chains TOML file of ``[[chain]]`` tables, each with its ``[[chain.token]]``
    allow-list.

    Example::

        [[chain]]
        chain_id = 1
        name = "Ethereum"
        rpc_urls = ["https://rpc.example", "https://backup.example"]  # in order of preference
        factory = "0x…"
        previous_factories = ["0x…"]          # optional: factories that made escrows before
        confirmations = 12
        relayer_key = "env:RELAYER_KEY_MAINNET"
        max_fee_per_gas = 300_000_000_000     # optional, wei
        relayer_min_balance = 50_000_000_000_000_000  # optional, wei
        eip1559 = false                       # optional: legacy gasPrice (default: detected)

        [[chain.token]]
        address = "0x…"
        symbol = "USDC"
        decimals = 6
        eip3009_name = "USD Coin"             # optional: EIP-3009 with this EIP-712 domain
        eip3009_version = "2"
        pegged = "USD"                        # optional: redeemed 1:1 for this currency

        [[chain.feed]]                        # a Chainlink aggregator (docs/integration/pricing.md)
        asset = "native"                      # or an allow-listed token's address
        currency = "USD"
        address = "0x…"
        heartbeat_s = 3600                    # optional (default 3600)

    A relayer key given inline (not ``env:`` / ``file:``) is refused unless
    ``allow_inline_keys`` (development). Errors never show a key.

    Each entry is merged over its chain's entry in the registry (:mod:`invoicing.registry`;
    ``registry_file`` replaces the shipped one), so a chain the registry knows needs only
    ``chain_id``, ``rpc_urls`` and ``relayer_key`` (``factory`` defaults to the address
    ``invoicing deploy`` gives the shipped factory on every chain, ``previous_factories`` to
    the addresses it gave the previous versions): the name, native coin,
    confirmations, explorer, fee type and token allow-list come from the registry. Any key the
    entry gives overrides the registry's, and its ``[[chain.token]]`` tables (if any) replace
    the registry's allow-list as a whole.
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"chains file {path}: {exc}") from None
    chains = []
    for entry in data.get("chain", []):
        try:
            chains.append(_chain_entry(merged_entry(entry, registry_file), allow_inline_keys))
        except (KeyError, TypeError, ValueError) as exc:
            reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(
                f"chains file {path}: chain {entry.get('chain_id', '?')}: {reason}"
            ) from None
    return chains


def _chain_entry(entry: dict[str, Any], allow_inline_keys: bool) -> ChainConfig:
    reference = entry.get("relayer_key")
    relayer_key = None
    if reference:
        if not str(reference).startswith(("env:", "file:")) and not allow_inline_keys:
            raise ValueError(
                'an inline relayer_key is refused outside development: use "env:NAME" or '
                '"file:PATH"'
            )
        relayer_key = SecretStr(resolve_secret(str(reference)))
    urls = _rpc_urls(entry)
    tokens = tuple(
        TokenConfig(
            address=str(token["address"]),
            symbol=str(token["symbol"]),
            decimals=int(token["decimals"]),
            eip3009=_eip3009(token),
            pegged=None if token.get("pegged") is None else str(token["pegged"]),
        )
        for token in entry.get("token", [])
    )
    feeds = tuple(
        FeedConfig(
            asset=str(feed["asset"]),
            currency=str(feed["currency"]),
            address=str(feed["address"]),
            heartbeat_s=int(feed.get("heartbeat_s", DEFAULT_HEARTBEAT_S)),
        )
        for feed in entry.get("feed", [])
    )
    return ChainConfig(
        chain_id=int(entry["chain_id"]),
        name=str(entry.get("name", f"chain {entry['chain_id']}")),
        rpc_url=urls[0],
        rpc_urls=urls,
        factory=str(entry["factory"]) if "factory" in entry else factory_address(),
        confirmations=int(entry.get("confirmations", 1)),
        relayer_key=relayer_key,
        native_symbol=str(entry.get("native_symbol", "ETH")),
        native_decimals=int(entry.get("native_decimals", 18)),
        tokens=tokens,
        explorer=None if entry.get("explorer") is None else str(entry["explorer"]),
        max_fee_per_gas=_optional_int(entry, "max_fee_per_gas"),
        relayer_min_balance=_optional_int(entry, "relayer_min_balance"),
        eip1559=_optional_bool(entry, "eip1559"),
        feeds=feeds,
        previous_factories=_previous_factories(entry),
    )


def _previous_factories(entry: dict[str, Any]) -> tuple[str, ...]:
    """``previous_factories`` (a list of addresses), by default the previous versions'
    deterministic addresses: an upgrade keeps the escrows the previous factories made."""
    found = entry.get("previous_factories", list(DEFAULT_PREVIOUS_FACTORIES))
    if isinstance(found, str) or not isinstance(found, list):
        raise ValueError("previous_factories must be a list of addresses")
    return tuple(map(str, found))


def _eip3009(token: dict[str, Any]) -> Eip712Domain | None:
    """``eip3009_name`` and ``eip3009_version``: the token's EIP-712 domain, given together."""
    name, version = token.get("eip3009_name"), token.get("eip3009_version")
    if name is None and version is None:
        return None
    if not isinstance(name, str) or not isinstance(version, str) or not name or not version:
        raise ValueError(
            f"token {token.get('address')}: eip3009_name and eip3009_version go together, "
            "as non-empty strings"
        )
    return Eip712Domain(name, version)


def _rpc_urls(entry: dict[str, Any]) -> tuple[str, ...]:
    """``rpc_urls`` (a list, in order of preference) and/or ``rpc_url`` (first)."""
    urls = entry.get("rpc_urls", [])
    if isinstance(urls, str) or not isinstance(urls, list):
        raise ValueError("rpc_urls must be a list of URLs")
    single = [str(entry["rpc_url"])] if entry.get("rpc_url") else []
    found = tuple(dict.fromkeys([*single, *map(str, urls)]))
    if not found:
        raise KeyError("rpc_urls")
    return found


def _optional_bool(entry: dict[str, Any], name: str) -> bool | None:
    value = entry.get(name)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")
    return value


def _optional_int(entry: dict[str, Any], name: str) -> int | None:
    value = entry.get(name)
    if value is None:
        return None
    number = int(str(value))
    if number < 0:
        raise ValueError(f"{name} must not be negative")
    return number


def resolve_secret(reference: str) -> str:
    """``env:NAME`` reads an environment variable, ``file:PATH`` a file; else the value itself."""
    if reference.startswith("env:"):
        value = os.environ.get(reference[4:])
        if not value:
            raise ValueError(f"environment variable {reference[4:]} is not set")
        return value
    if reference.startswith("file:"):
        try:
            return Path(reference[5:]).read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read {reference[5:]}: {exc.strerror}") from None
    return reference
