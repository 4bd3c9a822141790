"""What the payment page shows about one invoice, and the EIP-681 URI its QR code carries.

The public status JSON is exactly :meth:`PaymentView.public_status` (``PaymentStatus``, the
model that documents the route and writes its body); the HTML page renders the same fields,
so the page never leaks more than it shows (no owner, webhook or metadata).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from invoicing.addresses import normalize_address
from invoicing.brand.service import Brand
from invoicing.chain.chains import ChainRegistry
from invoicing.errors import ChainUnavailable, InvalidRequest, UnsupportedChain
from invoicing.invoices.amounts import round_up_shown, to_decimal_string
from invoicing.invoices.lifecycle import InvoiceStatus, shown_status
from invoicing.invoices.links import shop_name_of
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.web.routedocs import AddressOut, DecimalAmount, RawAmount, TimestampMs


def parse_payment_address(text: str) -> str:
    """The checksummed form of a ``0x`` + 40 hex digits address in any case (a payer's link
    is not refused for its letter case); 400 for anything else."""
    try:
        return normalize_address(text[:2] + text[2:].lower())
    except ValueError:
        raise InvalidRequest("not a payment address", {"field": "paymentAddress"}) from None


def payment_uri(
    payment_address: str, chain_id: int, token_address: str | None, amount_raw: int
) -> str:
    """EIP-681 URI: a native transfer, or the ERC-20 ``transfer`` call."""
    if token_address is None:
        return f"ethereum:{payment_address}@{chain_id}?value={amount_raw}"
    return (
        f"ethereum:{token_address}@{chain_id}/transfer"
        f"?address={payment_address}&uint256={amount_raw}"
    )


class PagePrice(BaseModel):
    """The fiat price an invoice was created with (docs/integration/pricing.md)."""

    model_config = ConfigDict(extra="forbid")

    currency: str = Field(description="ISO 4217.")
    amount: DecimalAmount
    rate: DecimalAmount = Field(
        description="Units of the currency one whole unit of the asset was worth."
    )


class PaymentStatus(BaseModel):
    """``GET /pay/<paymentAddress>/status``: what the hosted payment page shows (public,
    no owner data): the fields the page renders, built by ``PaymentView.public_status``."""

    model_config = ConfigDict(extra="forbid")

    paymentAddress: AddressOut
    chainId: int
    network: str
    tokenAddress: AddressOut | None
    symbol: str
    decimals: int = Field(ge=0)
    amount: DecimalAmount
    requiredRaw: RawAmount
    balanceRaw: RawAmount
    remainingRaw: RawAmount
    remaining: DecimalAmount
    paymentUri: str = Field(description="EIP-681 URI.")
    status: InvoiceStatus
    expiresAt: TimestampMs
    paidAt: TimestampMs | None
    description: str | None
    fiat: PagePrice | None = Field(
        default=None, description="Present only for an invoice created with a currency."
    )


# After payment the page goes back to the shop's redirectUrl by itself only while the invoice
# was paid less than this long ago; later it shows the link alone (docs/security.md#browsers):
# a page paid long ago (an owner paying dust into its own invoice) is no lasting redirect on
# the operator's domain.
AUTO_RETURN_WINDOW_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class PaymentView:
    """Everything the page shows, already formatted."""

    payment_address: str
    chain_id: int
    network: str
    token_address: str | None
    symbol: str
    decimals: int
    required_raw: int
    balance_raw: int
    status: str
    expires_at: int
    paid_at: int | None
    description: str | None
    # The payment address on the chain's block explorer (None: the chain has none).
    explorer_url: str | None = None
    # The fiat price locked at creation: (currency, amount, rate), or None.
    price: tuple[str, str, str] | None = None
    # The way back to the shop (``invoices.links``): after payment, and without paying.
    redirect_url: str | None = None
    cancel_url: str | None = None
    # Until when (ms) the page may go back to redirectUrl by itself: None when it may not
    # (not paid, no redirectUrl, or paid more than AUTO_RETURN_WINDOW_MS ago).
    auto_return_until: int | None = None
    # What the page calls the shop: the owner's display name, else the host of a link.
    shop_name: str | None = None
    # The owner's brand (no brand: every part None).
    brand: Brand = Brand()

    @property
    def return_url(self) -> str | None:
        """The link back to the shop for the current status: after payment the redirectUrl,
        otherwise (pending, expired, cancelled) the cancelUrl."""
        return self.redirect_url if self.status in ("paid", "completed") else self.cancel_url

    @property
    def remaining_raw(self) -> int:
        return max(0, self.required_raw - self.balance_raw)

    @property
    def amount(self) -> str:
        return to_decimal_string(self.required_raw, self.decimals)

    @property
    def remaining(self) -> str:
        return to_decimal_string(self.remaining_raw, self.decimals)

    @property
    def amount_shown(self) -> str:
        """The amount as the page shows it: rounded up to a few significant digits."""
        return to_decimal_string(round_up_shown(self.required_raw, self.decimals), self.decimals)

    @property
    def remaining_shown(self) -> str:
        """What is still due as the page asks the payer to send it: rounded up."""
        return to_decimal_string(round_up_shown(self.remaining_raw, self.decimals), self.decimals)

    @property
    def partly_paid(self) -> bool:
        return self.status == "pending" and 0 < self.balance_raw

    @property
    def uri(self) -> str:
        """The EIP-681 URI for what is still owed (the full amount before any payment)."""
        owed = self.remaining_raw or self.required_raw
        return payment_uri(self.payment_address, self.chain_id, self.token_address, owed)

    def public_status(self) -> PaymentStatus:
        status = self._status()
        if self.price is not None:
            currency, amount, rate = self.price
            status.fiat = PagePrice(currency=currency, amount=amount, rate=rate)
        return status

    def _status(self) -> PaymentStatus:
        return PaymentStatus(
            paymentAddress=self.payment_address,
            chainId=self.chain_id,
            network=self.network,
            tokenAddress=self.token_address,
            symbol=self.symbol,
            decimals=self.decimals,
            amount=self.amount,
            requiredRaw=str(self.required_raw),
            balanceRaw=str(self.balance_raw),
            remainingRaw=str(self.remaining_raw),
            remaining=self.remaining,
            paymentUri=self.uri,
            status=InvoiceStatus(self.status),
            expiresAt=self.expires_at,
            paidAt=self.paid_at,
            description=self.description,
        )


async def payment_view(
    chains: ChainRegistry,
    invoice: Invoice | InvoiceRow,
    now_ms: int,
    brand: Brand | None = None,
) -> PaymentView:
    """Build the view; a chain that is down or no longer configured still gets a page."""
    network, symbol = f"Chain {invoice.chain_id}", "ETH" if invoice.token_address is None else ""
    explorer_url = None
    try:
        chain = chains.get(invoice.chain_id)
        network = chain.config.name
        explorer_url = chain.config.explorer_address_url(invoice.payment_address)
        symbol = await chain.token_symbol(invoice.token_address)
    except (UnsupportedChain, ChainUnavailable):
        symbol = symbol or "tokens"
    link = invoice.redirect_url or invoice.cancel_url
    status = shown_status(invoice, now_ms)
    brand = brand or Brand()
    shop_name = brand.display_name or (shop_name_of(link) if link else None)
    return PaymentView(
        payment_address=invoice.payment_address,
        chain_id=invoice.chain_id,
        network=network,
        token_address=invoice.token_address,
        symbol=symbol,
        decimals=invoice.decimals,
        required_raw=int(invoice.required_raw),
        balance_raw=int(invoice.balance_raw),
        status=status,
        expires_at=invoice.expires_at,
        paid_at=invoice.paid_at,
        description=invoice.description,
        explorer_url=explorer_url,
        redirect_url=invoice.redirect_url,
        cancel_url=invoice.cancel_url,
        auto_return_until=_auto_return_until(invoice, status, now_ms),
        shop_name=shop_name,
        brand=brand,
        price=_price_of(invoice),
    )


def _auto_return_until(
    invoice: Invoice | InvoiceRow, status: InvoiceStatus, now_ms: int
) -> int | None:
    """The end of the automatic return to redirectUrl, while it is still ahead."""
    paid = status in (InvoiceStatus.PAID, InvoiceStatus.COMPLETED)
    if not paid or invoice.redirect_url is None or invoice.paid_at is None:
        return None
    until = invoice.paid_at + AUTO_RETURN_WINDOW_MS
    return until if now_ms < until else None


def _price_of(invoice: Invoice | InvoiceRow) -> tuple[str, str, str] | None:
    if invoice.currency is None or invoice.fiat_amount is None or invoice.rate is None:
        return None
    return (invoice.currency, invoice.fiat_amount, invoice.rate)
