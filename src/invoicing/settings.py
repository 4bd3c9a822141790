"""Service configuration: one Settings class (``INVOICING_*`` variables) and the chains file."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
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
    # Rate limits kept in the database (every process counts together); 0 turns one off.
    # Public payment-page routes, per client address:
    pay_rate_limit_per_minute: int = 120
    # Authenticated /integration/* routes, per owner:
    owner_rate_limit_per_minute: int = 1200
    # API keys issued per owner:
    api_key_issuance_per_hour: int = 10
    # Comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client.
    trusted_proxies: str = ""
    # Who may be an owner: unset = anyone with a wallet; comma-separated addresses, or
    # ``file:PATH`` (one address per line, ``#`` comments; re-read when the file changes).
    owners: str | None = None
    # Invoices one owner may have watched (pending, or expired within the late window).
    max_watched_invoices_per_owner: int = 10_000
    # Outside development, webhookUrl must be https unless this is true.
    webhook_allow_http: bool = False
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

    @model_validator(mode="after")
    def _check_trusted_proxies(self) -> Settings:
        from invoicing.ratelimit import trusted_networks

        trusted_networks(self.trusted_proxies)  # raises ValueError on a bad CIDR
        return self

    @model_validator(mode="after")
    def _check_owners(self) -> Settings:
        from invoicing.auth.admission import FILE_PREFIX, parse_owner_list

        if self.owners is not None and self.owners.startswith(FILE_PREFIX):
            try:
                text = Path(self.owners[len(FILE_PREFIX) :]).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"INVOICING_OWNERS: cannot read the owners file: {exc}") from None
            parse_owner_list(text, "\n")
        elif self.owners is not None:
            parse_owner_list(self.owners, ",")  # raises ValueError naming a bad address
        return self

    def chain_configs(self) -> dict[int, ChainConfig]:
        """Chains by id, from the inline list and the chains TOML file."""
        configs = {c.chain_id: c for c in self.chains}
        if self.chains_file is not None:
            for chain in load_chains_file(self.chains_file):
                configs[chain.chain_id] = chain
        return configs


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
            )
        )
    return chains


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
