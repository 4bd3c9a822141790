"""The WooCommerce plugin (integrations/woocommerce): its PHPUnit suite against the
WordPress and WooCommerce stand-ins, then the plugin's own code against a real
``invoicing dev``: an order's invoice created in a fiat price, paid on anvil, and the real
signed paid webhook, received raw, completing the order once; a tampered copy refused; a
refund of a manual-capture order paid back on chain through the service's refund delegate.

Needs Debian's php-cli and phpunit (scripts/install-php.sh): without them these tests skip
locally and fail in CI (``CI=true``). No WooCommerce runs here: see the plugin's README.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing_client import Client
from tests.clients.conftest import (
    DevService,
    RawReceiver,
    dev_service,
    mined,
    pay,
    raw_receiver,
    rpc,
)

__all__ = ["dev_service", "raw_receiver"]  # the fixtures, shared with tests/clients

PLUGIN = Path(__file__).resolve().parents[2] / "integrations" / "woocommerce"
LIVE = PLUGIN / "tests" / "live" / "live.php"
PAYER = Account.from_key(DEV_PRIVATE_KEYS[7]).address

pytestmark = pytest.mark.acceptance


@pytest.fixture(scope="module")
def php() -> str:
    found = shutil.which("php"), shutil.which("phpunit")
    if None in found:
        reason = "php or phpunit is not installed: run scripts/install-php.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return str(found[0])


def test_the_phpunit_suite_passes(php: str) -> None:
    run = subprocess.run(
        ["phpunit", "--configuration", str(PLUGIN / "phpunit.xml.dist")],
        cwd=PLUGIN,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK (" in run.stdout


def test_the_zip_holds_the_plugin_folder_without_tests(tmp_path: Path) -> None:
    out = tmp_path / "invoicing-gateway.zip"
    subprocess.run(["python3", str(PLUGIN / "build.py"), str(out)], check=True, capture_output=True)
    names = zipfile.ZipFile(out).namelist()
    assert names == [
        "invoicing-gateway/invoicing-gateway.php",
        "invoicing-gateway/README.md",
        "invoicing-gateway/includes/class-invoicing-client.php",
        "invoicing-gateway/includes/class-invoicing-webhook-signature.php",
        "invoicing-gateway/includes/class-wc-gateway-invoicing.php",
    ]


def live(php: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    run = subprocess.run(
        [php, str(LIVE), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_an_order_is_invoiced_paid_and_completed_by_the_real_signed_webhook(
    php: str, dev_service: DevService, raw_receiver: RawReceiver, tmp_path: Path
) -> None:
    owner = Account.create()
    with Client(dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()) as signer:
        api_key = signer.api_keys.create(label="shop").api_key
        secret = signer.webhook_secrets.create().secret
    env = {
        "INVOICING_BASE_URL": dev_service.base_url,
        "INVOICING_API_KEY": api_key,
        "INVOICING_OWNER": owner.address,
        "INVOICING_CHAIN_ID": str(dev_service.chain_id),
        "INVOICING_WEBHOOK_SECRET": secret,
        "SHOP_HOME": raw_receiver.base_url,
    }
    state = str(tmp_path / "orders")

    created = live(php, env, "create", state, "41", "30.00", "USD")

    order = created["order"]
    assert created["result"] == {
        "result": "success",
        "redirect": f"{dev_service.base_url}/pay/{order['paymentAddress']}",
    }
    with Client(dev_service.base_url, owner.address, api_key=api_key) as client:
        invoice = client.invoices.status(order["paymentAddress"])
        # 30.00 USD at the dev feed's 3,000 USD per ETH: 0.01 ETH, locked at creation.
        assert (invoice.invoice_id, invoice.required_raw, invoice.status) == (
            order["invoiceId"],
            10**16,
            "pending",
        )
        assert invoice.amount == "0.01"
        assert order["status"] == "pending"
        raw = httpx.get(
            f"{dev_service.base_url}/integration/invoices/status",
            params={"ownerAddress": owner.address, "paymentAddress": order["paymentAddress"]},
            headers={"x-service-api-key": api_key},
        ).json()["invoice"]
        assert (
            raw["redirectUrl"]
            == f"{raw_receiver.base_url}/checkout/order-received/41/?key=wc_order_41"
        )
        assert raw["fiat"]["currency"] == "USD"

        pay(dev_service, PAYER, order["paymentAddress"], 10**16)
        (delivery,) = raw_receiver.wait_for("/wc-api/invoicing/")
    body = tmp_path / "body"
    body.write_bytes(delivery.body)
    headers = json.dumps(delivery.headers)

    first = live(php, env, "deliver", state, str(body), headers)
    again = live(php, env, "deliver", state, str(body), headers)

    assert first["answer"] == [200, "paid"]
    paid = first["orders"]["41"]
    assert (paid["status"], paid["transactionId"]) == ("processing", order["paymentAddress"])
    assert again["answer"] == [200, "already"]
    assert again["orders"]["41"] == paid
    # The same delivery with one byte changed, or without its signature, changes nothing.
    tampered = tmp_path / "tampered"
    tampered.write_bytes(delivery.body.replace(b'"paid"', b'"PAID"', 1))
    fresh_state = str(tmp_path / "orders-again")
    live(php, env, "create", fresh_state, "41", "30.00", "USD")  # the same invoice answered 200
    refused = live(php, env, "deliver", fresh_state, str(tampered), headers)
    unsigned = {k: v for k, v in delivery.headers.items() if k != "x-service-webhook-signature"}
    refused_unsigned = live(php, env, "deliver", fresh_state, str(body), json.dumps(unsigned))
    assert refused["answer"] == refused_unsigned["answer"] == [401, "signature"]
    assert refused_unsigned["orders"]["41"]["status"] == "pending"


def test_a_refund_of_an_order_is_paid_back_on_chain_through_the_services_delegate(
    php: str, dev_service: DevService, raw_receiver: RawReceiver, tmp_path: Path
) -> None:
    owner = Account.create()
    with Client(dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()) as signer:
        api_key = signer.api_keys.create(label="shop").api_key
        named = signer.fees.set_refund_delegate(dev_service.chain_id, dev_service.refund_delegate)
    mined(dev_service, named.tx_hash)
    env = {
        "INVOICING_BASE_URL": dev_service.base_url,
        "INVOICING_API_KEY": api_key,
        "INVOICING_OWNER": owner.address,
        "INVOICING_CHAIN_ID": str(dev_service.chain_id),
        "INVOICING_WEBHOOK_SECRET": "",
        "INVOICING_MANUAL_CAPTURE": "yes",
        "SHOP_HOME": raw_receiver.base_url,
    }
    state = str(tmp_path / "orders")
    order = live(php, env, "create", state, "42", "30.00", "USD")["order"]
    # A payer of its own (impersonated on anvil): its balance moves only by what it is sent.
    payer = Account.create().address
    rpc(dev_service, "anvil_setBalance", [payer, hex(10**18)])
    rpc(dev_service, "anvil_impersonateAccount", [payer])
    pay(dev_service, payer, order["paymentAddress"], 10**16)
    paid_balance = int(rpc(dev_service, "eth_getBalance", [payer, "latest"]), 16)

    # The payment is recorded by the service's monitor shortly after it sees it paid.
    deadline = time.monotonic() + 30
    while (refunded := live(php, env, "refund", state, "42", "10.00"))["answer"] in (
        "no_payer_of_record",
        "invoice_pending",
    ):
        assert time.monotonic() < deadline, refunded
        time.sleep(0.2)

    assert refunded["answer"] is True, refunded
    note = refunded["orders"]["42"]["notes"][-1]
    # 10.00 of 30.00 USD is a third of the 0.01 ETH it locked, rounded down.
    prefix = f"Refund of 10.00 USD sent to the payer {payer} (3333333333333333 raw units): "
    assert note.startswith(prefix + "transaction 0x"), note
    assert note.endswith(". Reason: live test")
    tx_hash = note[len(prefix + "transaction ") :].split(".")[0]
    assert mined(dev_service, tx_hash)["status"] == "0x1"
    balance = int(rpc(dev_service, "eth_getBalance", [payer, "latest"]), 16)
    assert balance == paid_balance + 3333333333333333
    # A second refund asks the escrow for more than it holds now (a native refund pays the
    # rest to the owner): refused, and the order says why.
    again = live(php, env, "refund", state, "42", "30.00")
    assert again["answer"] == "insufficient_balance", again
