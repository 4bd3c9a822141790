"""Service configuration: one Settings class (``INVOICING_*`` variables) and the chains file."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDER_SECRET = "dev-only-insecure-secret-change-me"


@dataclass(frozen=True)
class ChainConfig:
    """One configured chain: where its node is and which factory serves it."""

    chain_id: int
    name: str
    rpc_url: str
    factory: str
    confirmations: int = 1
    relayer_key: str | None = None
    native_symbol: str = "ETH"
    native_decimals: int = 18
    # Relayer spend (None: the global INVOICING_RELAYER_* default). Wei, raw units.
    max_fee_per_gas: int | None = None  # never pay more per gas, bumps included
    relayer_min_balance: int | None = None  # below it the chain is degraded, withdrawals wait


class Settings(BaseSettings):
    """Every knob of the service. Built once at start-up and passed down."""

    model_config = SettingsConfigDict(env_prefix="INVOICING_", extra="ignore")

    environment: str = "production"
    database_url: str = "sqlite+aiosqlite:///./invoicing.db"
    chains_file: Path | None = None
    base_url: str = "http://127.0.0.1:8000"
    payment_page_url: str = "http://127.0.0.1:8000"
    secret: str = PLACEHOLDER_SECRET

    default_expiry_s: int = 24 * 3600
    late_payment_window_s: int = 7 * 24 * 3600
    signature_window_s: int = 300

    monitor_interval_s: float = 20.0
    monitor_expired_interval_s: float = 300.0
    # Addresses per balancesOf eth_call: ~3.5k gas each (native), ~4.5k (ERC-20), so a chunk
    # of 6,000 stays under a 30M-gas eth_call cap.
    monitor_batch_size: int = 6000
    # How often the monitor polls eth_blockNumber; a moved head triggers a pass of pending ones.
    monitor_poll_interval_s: float = 0.5
    webhook_retry_delay_s: float = 60.0
    webhook_max_attempts: int = 20
    webhook_timeout_s: float = 10.0
    webhook_allow_private: bool = False
    # Deliveries in flight per worker process; a slow endpoint holds only its own slot.
    webhook_concurrency: int = 200
    # Of those, at most this many to one host:port, so a hanging host cannot take them all.
    webhook_per_host_concurrency: int = Field(default=20, ge=1)
    webhook_poll_interval_s: float = 0.2
    withdrawal_interval_s: float = 600.0
    withdrawal_batch_size: int = 100
    relayer_resend_after_s: float = 60.0
    # How often the settlement worker follows relayer transactions and looks for full batches.
    settlement_poll_interval_s: float = 1.0
    fee_rate_limit_per_minute: int = 30
    # Relayer spend (DESIGN 11): gas a relayed meta-transaction may use at most, and how many
    # the relayer sends per owner and chain per UTC day.
    relayer_meta_gas_limit: int = Field(default=200_000, ge=21_000, le=16_777_216)
    relayer_meta_per_owner_per_day: int = Field(default=20, ge=0)
    # Defaults of each chain's ``max_fee_per_gas`` and ``relayer_min_balance`` (wei).
    relayer_max_fee_per_gas: int = Field(default=200 * 10**9, gt=0)
    relayer_min_balance: int = Field(default=10**16, ge=0)
    # The public payment-page status route re-checks the chain at most this often per invoice.
    page_recheck_interval_s: float = 5.0

    max_body_bytes: int = 64 * 1024
    run_workers: bool = True

    # Chains can also be given inline (used by `invoicing dev`), instead of a file.
    chains: list[ChainConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _refuse_placeholder_secret(self) -> Settings:
        if self.environment != "development" and self.secret == PLACEHOLDER_SECRET:
            raise ValueError("INVOICING_SECRET must be set to a real secret outside development")
        return self

    def chain_configs(self) -> dict[int, ChainConfig]:
        """Chains by id, from the inline list and the chains TOML file."""
        configs = {c.chain_id: c for c in self.chains}
        if self.chains_file is not None:
            for chain in load_chains_file(self.chains_file):
                configs[chain.chain_id] = chain
        return {chain_id: self._relayer_defaults(c) for chain_id, c in configs.items()}

    def _relayer_defaults(self, chain: ChainConfig) -> ChainConfig:
        """The chain with the global relayer-spend defaults where it sets none."""
        return replace(
            chain,
            max_fee_per_gas=chain.max_fee_per_gas or self.relayer_max_fee_per_gas,
            relayer_min_balance=(
                self.relayer_min_balance
                if chain.relayer_min_balance is None
                else chain.relayer_min_balance
            ),
        )


def load_chains_file(path: Path) -> list[ChainConfig]:
    """Parse a chains TOML file of ``[[chain]]`` tables.

    Example::

        [[chain]]
        chain_id = 1
        name = "Ethereum"
        rpc_url = "https://rpc.example"
        factory = "0x…"
        confirmations = 12
        relayer_key = "env:RELAYER_KEY_MAINNET"
        max_fee_per_gas = 300_000_000_000     # optional, wei
        relayer_min_balance = 50_000_000_000_000_000  # optional, wei
    """
    data = tomllib.loads(path.read_text())
    chains = []
    for entry in data.get("chain", []):
        relayer_key = entry.get("relayer_key")
        chains.append(
            ChainConfig(
                chain_id=int(entry["chain_id"]),
                name=str(entry.get("name", f"chain {entry['chain_id']}")),
                rpc_url=str(entry["rpc_url"]),
                factory=str(entry["factory"]),
                confirmations=int(entry.get("confirmations", 1)),
                relayer_key=resolve_secret(relayer_key) if relayer_key else None,
                native_symbol=str(entry.get("native_symbol", "ETH")),
                native_decimals=int(entry.get("native_decimals", 18)),
                max_fee_per_gas=_optional_int(entry, "max_fee_per_gas"),
                relayer_min_balance=_optional_int(entry, "relayer_min_balance"),
            )
        )
    return chains


def _optional_int(entry: dict[str, object], name: str) -> int | None:
    value = entry.get(name)
    if value is None:
        return None
    number = int(str(value))
    if number < 0:
        raise ValueError(f"chain {entry.get('chain_id')}: {name} must not be negative")
    return number


def resolve_secret(reference: str) -> str:
    """``env:NAME`` reads an environment variable, ``file:PATH`` a file; else the value itself."""
    import os

    if reference.startswith("env:"):
        value = os.environ.get(reference[4:])
        if not value:
            raise ValueError(f"environment variable {reference[4:]} is not set")
        return value
    if reference.startswith("file:"):
        return Path(reference[5:]).read_text().strip()
    return reference
