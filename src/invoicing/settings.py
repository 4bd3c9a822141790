"""Service configuration: one Settings class (``INVOICING_*`` variables).

The chains it serves come inline (``INVOICING_CHAINS``) or from the chains file
(:mod:`invoicing.chain.chains_file`), as ``ChainConfig`` values (:mod:`invoicing.chain.config`).

Secrets (``INVOICING_SECRET``, relayer keys, the metrics token) are held as pydantic
``SecretStr``: their repr and str are ``**********``, so no log line, error or repr of the
settings shows them; code that needs the value calls ``get_secret_value()``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from invoicing.auth.admission import FILE_PREFIX, parse_owner_list
from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.config import ChainConfig
from invoicing.chain.rpc import RpcPolicy
from invoicing.setting_values import (
    EXAMPLE_PLACEHOLDER,
    parse_origins,
    refuse_example_values,
    trusted_networks,
)

PLACEHOLDER_SECRET = "dev-only-insecure-secret-change-me"
DEVELOPMENT = "development"
# Outside development INVOICING_SECRET must have at least this many bytes (UTF-8).
MIN_SECRET_BYTES = 32


class Settings(BaseSettings):
    """Every knob of the service. Built once at start-up and passed down."""

    # Errors never echo the input: it holds INVOICING_SECRET and relayer keys.
    model_config = SettingsConfigDict(
        env_prefix="INVOICING_", extra="ignore", hide_input_in_errors=True
    )

    environment: str = "production"
    database_url: str = "sqlite+aiosqlite:///./invoicing.db"
    chains_file: Path | None = None
    # The chain and token registry a chains file's entries are merged over (None: the one
    # shipped in the package, invoicing/registry/chains.toml).
    registry_file: Path | None = None
    base_url: str = "http://127.0.0.1:8000"
    payment_page_url: str = "http://127.0.0.1:8000"
    secret: SecretStr = SecretStr(PLACEHOLDER_SECRET)
    # During a rotation of INVOICING_SECRET (docs/operations/configuration.md): the secret
    # coming next, which already opens stored API keys and webhook secrets before any process
    # seals under it, and the one before, which still opens them until `invoicing secrets
    # reencrypt` has sealed them all under INVOICING_SECRET. Neither ever seals.
    next_secret: SecretStr | None = None
    previous_secret: SecretStr | None = None
    # When set, /metrics answers only requests with `Authorization: Bearer <token>`.
    metrics_token: SecretStr | None = None

    default_expiry_s: int = 24 * 3600
    late_payment_window_s: int = 7 * 24 * 3600
    # A fiat price read from a price feed holds this long: the invoice expires at its end
    # (docs/integration/pricing.md).
    quote_window_s: int = Field(default=15 * 60, ge=60, le=7 * 24 * 3600)
    signature_window_s: int = 300

    monitor_interval_s: float = 20.0
    monitor_expired_interval_s: float = 300.0
    # Addresses per balancesOf eth_call: a 30M-gas eth_call (anvil's cap; geth's is 50M)
    # reads 9,611 native or 9,293 TUSD balances (bench/monitor.py's anvil), so a chunk of 9,000
    # is one call; a costlier token answers fewer and the rest is read in further calls.
    monitor_batch_size: int = 9000
    # Gas of one monitor read (EscrowReader, every asset in one eth_call): a pass's escrows
    # are read in calls of this much estimated gas (chain/reader.py; go-ethereum's default
    # eth_call cap is 50M). A node that allows less answers part of a call and the rest is
    # read in another.
    monitor_read_gas: int = Field(default=50_000_000, gt=0)
    # Every escrow ever created is read for life at this low rate once its late-payment window
    # is over (its own token, every allow-listed token and the native coin, in batches);
    # funds found are swept to the owner.
    lifetime_check_interval_s: float = Field(default=86400.0, gt=0)
    # How often the monitor looks for escrows whose lifetime check is due (one indexed query).
    lifetime_poll_interval_s: float = Field(default=60.0, gt=0)
    # How often the monitor polls eth_blockNumber; a moved head triggers a pass of pending ones.
    monitor_poll_interval_s: float = 0.5
    # A worker's lease on its shards of a chain's watched invoices, renewed every third of it:
    # a killed worker's invoices go unread for at most this long (monitor/shards.py).
    monitor_lease_s: float = Field(default=10.0, gt=0)
    webhook_retry_delay_s: float = 60.0
    webhook_max_attempts: int = 20
    webhook_timeout_s: float = 10.0
    webhook_allow_private: bool = False
    # Deliveries in flight per worker process; a slow endpoint holds only its own slot.
    webhook_concurrency: int = 200
    # Of those, at most this many of one owner's to one host:port, so a hanging host cannot
    # take them all, nor one owner all of a host that other owners use too.
    webhook_per_host_concurrency: int = Field(default=20, ge=1)
    # One owner's share: beyond it an owner only takes spare slots, never the quarter of them
    # kept for owners within their share (notifications/claims.py), so one owner's endpoints
    # that hang or fail hold at most 3/4 of the slots and the others still find free ones.
    webhook_per_owner_concurrency: int = Field(default=20, ge=1)
    webhook_poll_interval_s: float = 0.2
    # Seconds a webhook host's resolved addresses are kept (each answer is still checked by
    # the SSRF guard at every delivery, and connections go only to the checked addresses).
    webhook_dns_cache_s: float = Field(default=10.0, ge=0)
    # Webhook name lookups run on threads of their own (never the event loop's default
    # executor): at most this many at once, each waited for at most the timeout; with all
    # busy a delivery fails at once and is retried later. A failed lookup is kept (not
    # retried) for webhook_dns_failure_cache_s.
    webhook_dns_threads: int = Field(default=8, ge=1)
    webhook_dns_timeout_s: float = Field(default=5.0, gt=0)
    webhook_dns_failure_cache_s: float = Field(default=30.0, ge=0)
    # Keep-alive connections receivers leave open: closed after this long idle, and the
    # least recently used first past the pool's and one owner's bound (outbound/http11.py).
    webhook_idle_connection_s: float = Field(default=30.0, gt=0)
    webhook_max_idle_connections: int = Field(default=256, ge=0)
    webhook_max_idle_connections_per_owner: int = Field(default=64, ge=0)
    # Delivered and failed webhook events (and their attempts) are deleted by housekeeping
    # once older than this; pending ones are kept.
    webhook_event_retention_s: float = Field(default=30 * 86400.0, gt=0)
    # Events to owners' endpoints (docs/architecture.md#retries): a failed delivery is tried
    # again after event_retry_base_s, doubling up to event_retry_max_delay_s, until the event is
    # event_retry_window_s old (then once more); an endpoint that failed every attempt for
    # event_retry_window_s is disabled. Events are listed (and kept) for
    # webhook_event_retention_s.
    event_retry_base_s: float = Field(default=60.0, gt=0)
    event_retry_max_delay_s: float = Field(default=12 * 3600.0, gt=0)
    event_retry_window_s: float = Field(default=3 * 86400.0, gt=0)
    max_event_endpoints_per_owner: int = Field(default=16, ge=1)
    # Mail (docs/integration/email.md): the SMTP server (smtp:// or smtps://, with
    # ?starttls=1 and user:password@ as the server asks; notifications/mail/smtp.py) and the
    # From address. Without both nothing is sent; messages wait in the outbox.
    smtp_url: SecretStr | None = None
    smtp_from: str | None = None
    # Each step of a send (connect, TLS, login, data) waits at most this long.
    smtp_timeout_s: float = Field(default=10.0, gt=0)
    # A message the server did not take is tried again after mail_retry_delay_s, doubling up
    # to mail_retry_max_delay_s, mail_max_attempts times in all.
    mail_retry_delay_s: float = Field(default=60.0, gt=0)
    mail_retry_max_delay_s: float = Field(default=3600.0, gt=0)
    mail_max_attempts: int = Field(default=20, ge=1)
    mail_poll_interval_s: float = Field(default=1.0, gt=0)
    withdrawal_interval_s: float = 600.0
    withdrawal_batch_size: int = 100
    relayer_resend_after_s: float = 60.0
    # How often the settlement worker follows relayer transactions and looks for full batches.
    settlement_poll_interval_s: float = 1.0
    # A parked escrow (its withdraw does not simulate, or its sweep moved nothing) is tried
    # again after this delay, doubled at each further failure up to the maximum; sooner when
    # its balance changes.
    withdrawal_park_retry_s: float = Field(default=3600.0, gt=0)
    withdrawal_park_retry_max_s: float = Field(default=86400.0, gt=0)
    # A settlement step that failed on an RPC error (one chain, or one batch) is retried
    # after settlement_poll_interval_s, doubled at each failure up to this.
    settlement_backoff_max_s: float = Field(default=300.0, gt=0)
    fee_rate_limit_per_minute: int = 30
    # Rate limits kept in the database (every process counts together); 0 turns one off.
    # Public payment-page routes, per client address:
    pay_rate_limit_per_minute: int = 120
    # Authenticated /integration/* routes, per owner:
    owner_rate_limit_per_minute: int = 1200
    # API keys issued per owner:
    api_key_issuance_per_hour: int = 10
    # Webhook signing secrets issued per owner (at most 5 are active at once, see
    # notifications/signing.py; this bounds a create-and-revoke loop):
    webhook_secret_issuance_per_hour: int = 20
    # Redeliveries (POST /integration/events/{id}/redeliver) and test pings (POST
    # /integration/webhook-endpoints/test) per owner: each queues a delivery the worker
    # sends, so their cost is bounded (0 turns a limit off).
    event_redelivery_per_hour: int = 100
    webhook_test_per_hour: int = 20
    # The dashboard (web/dashboard): how long a session lasts, how long a login link printed
    # by `invoicing dashboard-link` stays usable, and sign-in attempts (nonces, messages,
    # links) per client network per minute.
    dashboard_session_ttl_s: int = Field(default=8 * 3600, ge=60)
    dashboard_link_ttl_s: int = Field(default=600, ge=10, le=3600)
    dashboard_sign_in_per_minute: int = Field(default=30, ge=0)
    # Comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client.
    trusted_proxies: str = ""
    # CORS (api/cors.py): origins whose pages may call /fees/* and /pay/<address>/status
    # (comma-separated, or * for any), and those that may call /integration/* (none by
    # default: it is server-to-server). Never with credentials.
    cors_allow_origins: str = "*"
    cors_integration_allow_origins: str = ""
    # Who may be an owner: unset = anyone with a wallet; comma-separated addresses, or
    # ``file:PATH`` (one address per line, ``#`` comments; re-read when the file changes).
    owners: str | None = None
    # A key the service holds to refund as an owner's refund delegate, once the owner names its
    # address (docs/integration/refunds.md#refunds-the-service-signs): 0x and 64 hex digits.
    refund_delegate_key: SecretStr | None = None
    # Invoices one owner may have watched (pending, or expired within the late window).
    max_watched_invoices_per_owner: int = 10_000
    # Invoices one owner may create per UTC day (create requests, identical retries
    # included): with the watched cap, this bounds the reads an owner's escrows cost,
    # deleted ones included (monitor/lifetime.py).
    invoice_creation_per_owner_per_day: int = Field(default=10_000, ge=0)
    # Outside development, webhookUrl must be https unless this is true.
    webhook_allow_http: bool = False
    # Relayer spend (docs/architecture.md#relayer-spend-rules): gas a relayed meta-transaction may
    # use at most, and how many the relayer sends per owner and chain per UTC day.
    relayer_meta_gas_limit: int = Field(default=250_000, ge=21_000, le=16_777_216)
    relayer_meta_per_owner_per_day: int = Field(default=20, ge=0)
    # Gasless payments (EIP-3009): the longest validity window (validBefore - now) accepted,
    # and the least time left before validBefore for the relayer's transaction to be mined.
    gasless_max_validity_s: int = Field(default=3600, ge=60, le=7 * 86400)
    gasless_min_validity_left_s: int = Field(default=30, ge=1, le=3600)
    # Payments the relayer carries (payments/seam.py): how many of one payer's may fail on
    # chain per chain and UTC day before none is carried for it until the next day; how long
    # an x402 request (a paid GET of an invoice, a facilitator settle) waits for its receipt;
    # x402 facilitator calls (verify and settle) per owner per minute.
    relayer_payer_failures_per_day: int = Field(default=3, ge=1)
    x402_settle_wait_s: float = Field(default=20.0, gt=0, le=120)
    x402_facilitator_per_minute: int = Field(default=120, ge=0)
    # Subscriptions (payments/subscriptions): the shortest period accepted (60 s in
    # development), how often the worker looks for due periods, how long after a failed
    # charge it tries again, how long after a period is due it keeps trying (then the
    # subscription is past due and the period failed), and after how many failed periods in
    # a row the subscription is cancelled.
    subscription_min_period_s: int = Field(default=3600, ge=60)
    subscription_interval_s: float = Field(default=15.0, gt=0, le=3600)
    subscription_retry_s: int = Field(default=600, ge=1)
    subscription_grace_s: int = Field(default=3 * 86400, ge=0)
    subscription_max_failed_periods: int = Field(default=3, ge=1)
    # The relayer's daily budget (settlement/budget.py): transactions and gas (limits) per
    # chain and UTC day, and the share of one owner (all owners without a paid invoice on
    # the chain share one); an owner whose relayed transactions revert on-chain waits this
    # long, doubled at each revert in a row up to the maximum.
    relayer_chain_tx_per_day: int = Field(default=5_000, ge=1)
    relayer_chain_gas_per_day: int = Field(default=500_000_000, ge=21_000)
    relayer_owner_tx_per_day: int = Field(default=200, ge=1)
    relayer_owner_gas_per_day: int = Field(default=50_000_000, ge=21_000)
    # Sweeps of paid invoices may take an owner's share beyond it: each of the owner's
    # invoices paid on the chain in the last 24 hours adds one transaction and this much gas
    # (0: no growth). Sweeps of other escrows, where a stranger's dust lands, get the base.
    relayer_sweep_gas_per_paid_invoice: int = Field(default=100_000, ge=0)
    relayer_owner_revert_retry_s: float = Field(default=600.0, gt=0)
    relayer_owner_revert_retry_max_s: float = Field(default=86_400.0, gt=0)
    # Defaults of each chain's ``max_fee_per_gas`` and ``relayer_min_balance`` (wei).
    relayer_max_fee_per_gas: int = Field(default=200 * 10**9, gt=0)
    relayer_min_balance: int = Field(default=10**16, ge=0)
    # The public payment-page status route re-checks the chain at most this often per invoice.
    page_recheck_interval_s: float = 5.0

    # JSON-RPC (each chain's rpc_urls, see chain.rpc): a timeout per request; timeouts,
    # dropped connections, 429 and 5xx are retried on the next URL with jittered backoff
    # from rpc_backoff_s (doubling up to rpc_backoff_max_s), at most rpc_max_attempts tries
    # per request; a 429's Retry-After is honoured up to rpc_retry_after_max_s; a URL that
    # failed rpc_failures_before_cooldown times in a row is set aside for rpc_cooldown_s.
    # A head that no second URL reports is believed only rpc_head_lead_max_blocks (at most
    # half the chain's confirmations) ahead of the last head two URLs reported, plus
    # rpc_head_max_blocks_per_s for each second since; a URL behind the others whose head
    # block is older than rpc_head_stale_s lags and leaves the quorum (chain.heads).
    rpc_timeout_s: float = Field(default=10.0, gt=0)
    rpc_max_attempts: int = Field(default=4, ge=1)
    rpc_backoff_s: float = Field(default=0.25, ge=0)
    rpc_backoff_max_s: float = Field(default=5.0, ge=0)
    rpc_retry_after_max_s: float = Field(default=30.0, ge=0)
    rpc_failures_before_cooldown: int = Field(default=3, ge=1)
    rpc_cooldown_s: float = Field(default=60.0, ge=0)
    rpc_head_lead_max_blocks: int = Field(default=16, ge=0)
    rpc_head_max_blocks_per_s: float = Field(default=5.0, ge=0)
    rpc_head_stale_s: float = Field(default=60.0, gt=0)

    max_body_bytes: int = 64 * 1024
    run_workers: bool = True

    # Chains can also be given inline (used by `invoicing dev`), instead of a file.
    chains: list[ChainConfig] = Field(default_factory=list)

    _chains_from_file: list[ChainConfig] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _check_secrets_and_chains(self) -> Settings:
        development = self.environment == DEVELOPMENT
        secret = self.secret.get_secret_value()
        if not development:
            if secret == PLACEHOLDER_SECRET or secret.startswith(EXAMPLE_PLACEHOLDER):
                raise ValueError(
                    "INVOICING_SECRET must be set to a real secret outside development"
                )
            if len(secret.encode()) < MIN_SECRET_BYTES:
                raise ValueError(
                    f"INVOICING_SECRET must be at least {MIN_SECRET_BYTES} bytes outside "
                    "development (for example: openssl rand -hex 32)"
                )
            refuse_example_values(
                {
                    "INVOICING_DATABASE_URL": self.database_url,
                    "INVOICING_METRICS_TOKEN": self.metrics_token,
                    "INVOICING_SMTP_URL": self.smtp_url,
                }
            )
            if any(chain.relayer_key is not None for chain in self.chains):
                raise ValueError(
                    "relayer keys in INVOICING_CHAINS are refused outside development: "
                    'give them in the chains file as "env:NAME" or "file:PATH"'
                )
        if self.chains_file is not None:
            self._chains_from_file = load_chains_file(
                self.chains_file, allow_inline_keys=development, registry_file=self.registry_file
            )
        return self

    @model_validator(mode="after")
    def _check_refund_delegate_key(self) -> Settings:
        key = self.refund_delegate_key
        if key is not None and not re.fullmatch(r"0x[0-9a-fA-F]{64}", key.get_secret_value()):
            raise ValueError("INVOICING_REFUND_DELEGATE_KEY must be 0x and 64 hex digits")
        return self

    @model_validator(mode="after")
    def _check_trusted_proxies(self) -> Settings:
        trusted_networks(self.trusted_proxies)  # raises ValueError on a bad CIDR
        return self

    @model_validator(mode="after")
    def _check_cors_origins(self) -> Settings:
        parse_origins(self.cors_allow_origins)  # raises ValueError naming a bad origin
        parse_origins(self.cors_integration_allow_origins)
        return self

    @model_validator(mode="after")
    def _check_smtp(self) -> Settings:
        # Read in full by notifications/mail/smtp.py; refused here so a bad one stops the start.
        if self.smtp_url is not None:
            parts = urlsplit(self.smtp_url.get_secret_value())
            if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
                raise ValueError("INVOICING_SMTP_URL must be smtp://host[:port] or smtps://…")
            if parts.scheme == "smtps" and "starttls=1" in parts.query:
                raise ValueError("INVOICING_SMTP_URL: smtps:// is TLS already; drop starttls")
        return self

    @model_validator(mode="after")
    def _check_owners(self) -> Settings:
        if self.owners is not None and self.owners.startswith(FILE_PREFIX):
            try:
                text = Path(self.owners[len(FILE_PREFIX) :]).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"INVOICING_OWNERS: cannot read the owners file: {exc}") from None
            parse_owner_list(text, "\n")
        elif self.owners is not None:
            parse_owner_list(self.owners, ",")  # raises ValueError naming a bad address
        return self

    def rpc_policy(self) -> RpcPolicy:
        """Timeouts and failover of every chain's JSON-RPC client."""
        return RpcPolicy(
            timeout_s=self.rpc_timeout_s,
            max_attempts=self.rpc_max_attempts,
            backoff_s=self.rpc_backoff_s,
            backoff_max_s=self.rpc_backoff_max_s,
            retry_after_max_s=self.rpc_retry_after_max_s,
            failures_before_cooldown=self.rpc_failures_before_cooldown,
            cooldown_s=self.rpc_cooldown_s,
            head_lead_max_blocks=self.rpc_head_lead_max_blocks,
            head_max_blocks_per_s=self.rpc_head_max_blocks_per_s,
            head_stale_s=self.rpc_head_stale_s,
        )

    def chain_configs(self) -> dict[int, ChainConfig]:
        """Chains by id, from the inline list and the chains TOML file (read at start-up)."""
        configs = {c.chain_id: c for c in self.chains}
        for chain in self._chains_from_file:
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
