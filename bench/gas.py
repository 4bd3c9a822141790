"""Gas per swept invoice: PaymentFactory.withdraw at batch sizes 1, 10 and 100.

Starts its own anvil, deploys the dev contracts, funds N fresh escrows (native coin, then
TestToken), sweeps them in one withdraw and prints one line per case, e.g.::

    gas native batch=100 per_invoice=38565 plain_transfer=21000 ratio=1.84

``plain_transfer`` is measured in the same run: a native transfer to a fresh address, and a
TestToken transfer to a fresh address for the ERC-20 lines. Exits 1 when batch 100 misses the
targets of docs/architecture.md#sweeps (40,000 native, 45,000 ERC-20 per invoice).

    .venv/bin/python bench/gas.py [--batches 1,10,100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable

from eth_account import Account

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.calldata import decode_balances_of, encode_balances_of, encode_withdraw
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

PAYER_KEY = DEV_PRIVATE_KEYS[2]
CALLER_KEY = DEV_PRIVATE_KEYS[3]
# An owner wallet that already exists and holds TUSD, as a merchant's would: paying a brand-new
# account would add a one-off 25,000 gas (native) or 17,100 gas (first token balance) per batch.
OWNER = DEV_ADDRESSES[5]
NATIVE_AMOUNT = 10**15
TOKEN_AMOUNT = 1_000_000
TARGET_PER_INVOICE = {"native": 40_000, "erc20": 45_000}
TARGET_BATCH = 100


async def send_all(evm: EvmClient, key: str, calls: list[tuple[str, bytes, int]]) -> None:
    """Send (to, data, value) transactions back to back, then wait for all of them."""
    sent = [await evm.transact(key, to, data, value=value, wait=False) for to, data, value in calls]
    for tx in sent:
        receipt = await evm.wait_for_receipt(tx["transactionHash"])
        if receipt["status"] != 1:
            raise RuntimeError(f"funding transaction failed: {tx['transactionHash']}")


async def gas_used(evm: EvmClient, key: str, to: str, data: bytes, value: int = 0) -> int:
    receipt = await evm.transact(key, to, data, value=value)
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction to {to} failed")
    return int(receipt["gasUsed"])


async def sweep_cost(
    evm: EvmClient,
    dev: DevDeployment,
    token: str,
    batch: int,
    fund: Callable[[str], tuple[str, bytes, int]],
) -> int:
    """Gas per invoice of one withdraw sweeping ``batch`` freshly funded escrows."""
    salts = [os.urandom(32) for _ in range(batch)]
    escrows = [escrow_address(dev.factory, OWNER, salt) for salt in salts]
    await send_all(evm, PAYER_KEY, [fund(escrow) for escrow in escrows])
    used = await gas_used(evm, CALLER_KEY, dev.factory, encode_withdraw(OWNER, token, salts))
    balances = decode_balances_of(
        await evm.eth_call(dev.factory, encode_balances_of(token, escrows))
    )
    if any(balances):
        raise RuntimeError(f"batch {batch}: not every escrow was swept")
    return round(used / batch)


async def run(batches: list[int]) -> bool:
    met_targets = True
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        try:
            dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
            fresh = Account.create().address
            native_plain = await gas_used(evm, PAYER_KEY, fresh, b"", value=NATIVE_AMOUNT)
            erc20_plain = await gas_used(
                evm,
                PAYER_KEY,
                dev.token,
                encode_call(TEST_TOKEN, "transfer", Account.create().address, 1),
            )
            cases: list[tuple[str, str, int, Callable[[str], tuple[str, bytes, int]]]] = [
                ("native", ZERO_ADDRESS, native_plain, lambda e: (e, b"", NATIVE_AMOUNT)),
                (
                    "erc20",
                    dev.token,
                    erc20_plain,
                    lambda e: (dev.token, encode_call(TEST_TOKEN, "transfer", e, TOKEN_AMOUNT), 0),
                ),
            ]
            for kind, token, plain, fund in cases:
                for batch in batches:
                    per_invoice = await sweep_cost(evm, dev, token, batch, fund)
                    print(
                        f"gas {kind} batch={batch} per_invoice={per_invoice} "
                        f"plain_transfer={plain} ratio={per_invoice / plain:.2f}"
                    )
                    if batch == TARGET_BATCH and per_invoice > TARGET_PER_INVOICE[kind]:
                        print(
                            f"FAIL {kind}: {per_invoice} > {TARGET_PER_INVOICE[kind]} per invoice",
                            file=sys.stderr,
                        )
                        met_targets = False
        finally:
            await evm.aclose()
    return met_targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,10,100", help="comma-separated batch sizes")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.batches = "1,2"
    batches = [int(b) for b in args.batches.split(",")]
    sys.exit(0 if asyncio.run(run(batches)) else 1)


if __name__ == "__main__":
    main()
