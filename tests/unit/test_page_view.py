"""Payment page pieces without a server: EIP-681 URIs, the view, the QR SVG, rendering."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import zxingcpp
from PIL import Image, ImageDraw

from invoicing.chain.chains import ChainRegistry
from invoicing.chain.fake import FakeChain
from invoicing.errors import InvalidRequest
from invoicing.invoices.lifecycle import shown_status
from invoicing.tables.invoices import Invoice
from invoicing.web.page.i18n import LANGUAGES, PageLocale
from invoicing.web.page.qr import qr_svg
from invoicing.web.page.render import asset, asset_url, payment_page
from invoicing.web.page.routes import RecheckThrottle
from invoicing.web.page.view import PaymentView, parse_payment_address, payment_uri, payment_view

ESCROW = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
TOKEN = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"


def view(**fields: object) -> PaymentView:
    values: dict[str, object] = {
        "payment_address": ESCROW,
        "chain_id": 8453,
        "network": "Base",
        "token_address": None,
        "symbol": "ETH",
        "decimals": 18,
        "required_raw": 15 * 10**17,
        "balance_raw": 0,
        "status": "pending",
        "expires_at": 1_900_000_000_000,
        "paid_at": None,
        "description": None,
    }
    values.update(fields)
    return PaymentView(**values)  # type: ignore[arg-type]


def test_native_uri() -> None:
    assert payment_uri(ESCROW, 1, None, 10**18) == f"ethereum:{ESCROW}@1?value=1000000000000000000"


def test_erc20_uri() -> None:
    assert payment_uri(ESCROW, 137, TOKEN, 2_500_000) == (
        f"ethereum:{TOKEN}@137/transfer?address={ESCROW}&uint256=2500000"
    )


def test_remaining_after_a_partial_payment_and_its_uri() -> None:
    partial = view(balance_raw=4 * 10**17)

    assert (partial.amount, partial.remaining, partial.remaining_raw) == ("1.5", "1.1", 11 * 10**17)
    assert partial.uri == f"ethereum:{ESCROW}@8453?value={11 * 10**17}"


def test_overpayment_floors_remaining_at_zero_and_the_uri_keeps_the_full_amount() -> None:
    over = view(balance_raw=2 * 10**18, status="paid")

    assert (over.remaining_raw, over.remaining) == (0, "0")
    assert over.uri == f"ethereum:{ESCROW}@8453?value={15 * 10**17}"


def test_public_status_holds_only_what_the_page_shows() -> None:
    data = (
        view(token_address=TOKEN, symbol="USDC", decimals=6, required_raw=5_000_000)
        .public_status()
        .model_dump(mode="json")
    )

    assert data == {
        "paymentAddress": ESCROW,
        "chainId": 8453,
        "network": "Base",
        "tokenAddress": TOKEN,
        "symbol": "USDC",
        "decimals": 6,
        "amount": "5",
        "requiredRaw": "5000000",
        "balanceRaw": "0",
        "remainingRaw": "5000000",
        "remaining": "5",
        "paymentUri": f"ethereum:{TOKEN}@8453/transfer?address={ESCROW}&uint256=5000000",
        "status": "pending",
        "expiresAt": 1_900_000_000_000,
        "paidAt": None,
        "description": None,
        "fiat": None,
    }


@pytest.mark.parametrize(
    ("status", "now_ms", "shown"),
    [
        ("pending", 999, "pending"),
        ("pending", 1000, "expired"),
        ("paid", 5000, "paid"),
        ("cancelled", 5000, "cancelled"),
        ("completed", 5000, "completed"),
    ],
)
def test_shown_status(status: str, now_ms: int, shown: str) -> None:
    assert shown_status(Invoice(status=status, expires_at=1000), now_ms) == shown


def test_payment_address_is_checksummed() -> None:
    assert parse_payment_address(ESCROW.lower()) == ESCROW


@pytest.mark.parametrize(
    "text", ["", "0x", ESCROW[:-1], ESCROW + "0", "0X" + ESCROW[2:], "0x" + "z" * 40, " " + ESCROW]
)
def test_malformed_payment_address_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_payment_address(text)


def rasterize(svg: str, scale: int = 6) -> Image.Image:
    """Draw the SVG's path runs (``M x y h w v1 ...``) exactly as a browser would."""
    size = int(re.search(r'viewBox="0 0 (\d+) \1"', svg).group(1))  # type: ignore[union-attr]
    image = Image.new("L", (size * scale, size * scale), 255)
    draw = ImageDraw.Draw(image)
    for x, y, width in re.findall(r"M(\d+) (\d+)h(\d+)v1h-\3z", svg):
        left, top, w = int(x) * scale, int(y) * scale, int(width) * scale
        draw.rectangle([left, top, left + w - 1, top + scale - 1], fill=0)
    return image


@pytest.mark.parametrize(
    "text",
    [
        f"ethereum:{ESCROW}@1?value=1",
        f"ethereum:{TOKEN}@31337/transfer?address={ESCROW}&uint256={2**256 - 1}",
    ],
)
def test_qr_svg_decodes_to_the_text(text: str) -> None:
    svg = qr_svg(text, title="Pay <1> & more")

    results = zxingcpp.read_barcodes(rasterize(svg))

    assert [r.text for r in results] == [text]
    assert "<title>Pay &lt;1&gt; &amp; more</title>" in svg


def test_page_escapes_the_description_and_the_data_block() -> None:
    html = payment_page(view(description="</script><b>x</b> & 'y'"))

    assert '<p class="description" id="description">&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;' in html
    assert '"description":"\\u003c/script\\u003e\\u003cb\\u003ex\\u003c/b\\u003e \\u0026' in html
    assert "<b>x</b>" not in html


def test_assets_are_only_the_known_files() -> None:
    assert asset("pay.js").startswith(b"// Live payment page")
    assert re.fullmatch(r"/pay/assets/pay\.css\?v=[0-9a-f]{12}", asset_url("pay.css"))
    with pytest.raises(KeyError):
        asset("../templates/pay.html")


def test_recheck_throttle_allows_one_per_interval_per_invoice() -> None:
    throttle = RecheckThrottle()

    answers = [throttle.allow("a", 60), throttle.allow("a", 60), throttle.allow("b", 60)]

    assert answers == [True, False, True]
    assert throttle.allow("a", 0) is True


# The chain's explorer.


def test_page_links_the_payment_address_to_the_chains_explorer() -> None:
    link = f"https://basescan.org/address/{ESCROW}"

    html = payment_page(view(explorer_url=link))

    assert (
        f'<code class="mono address" id="address" dir="ltr">{ESCROW}</code> '
        '<button type="button" id="copy" class="secondary" hidden>Copy address</button> '
        f'<a class="explorer" id="explorer" href="{link}" rel="noopener noreferrer" '
        'target="_blank">View on the Base explorer</a></dd>'
    ) in html


def test_page_without_an_explorer_has_no_link() -> None:
    html = payment_page(view())

    assert 'id="explorer"' not in html
    assert "/address/" not in html


async def test_view_takes_the_network_name_and_explorer_from_the_chain_config() -> None:
    chain = FakeChain(chain_id=8453)
    chain.config = replace(chain.config, name="Base", explorer="https://basescan.org/")
    invoice = Invoice(
        payment_address=ESCROW,
        chain_id=8453,
        token_address=None,
        decimals=18,
        required_raw="1",
        balance_raw="0",
        status="pending",
        expires_at=1_900_000_000_000,
        paid_at=None,
        description=None,
    )

    shown = await payment_view(ChainRegistry({8453: chain}), invoice, now_ms=0)

    assert shown.network == "Base"
    assert shown.explorer_url == f"https://basescan.org/address/{ESCROW}"
    unknown = await payment_view(ChainRegistry({}), invoice, now_ms=0)
    assert (unknown.network, unknown.explorer_url) == ("Chain 8453", None)


@pytest.mark.parametrize(
    ("code", "shown"),
    [("en", "$19.99"), ("de", "19,99\xa0$"), ("fr", "19,99\xa0$US"), ("ja", "$19.99")],
)
def test_a_fiat_price_is_shown_in_the_page_language_and_the_status(code: str, shown: str) -> None:
    priced = view(price=("USD", "19.99", "2500"))

    locale = PageLocale(next(language for language in LANGUAGES if language.code == code))
    html = payment_page(priced, locale)

    assert re.search(r'<strong class="big" id="price">([^<]*)</strong>', html)[1] == shown  # type: ignore[index]
    assert priced.public_status().model_dump(mode="json", exclude_unset=True)["fiat"] == {
        "currency": "USD",
        "amount": "19.99",
        "rate": "2500",
    }
    assert 'id="price"' not in payment_page(view(), locale)
