"""What the relayer may spend, on FakeChain: the meta-transaction gas cap, the relayer balance
threshold, and the per-chain settings behind them (TOML, global defaults)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from invoicing.chain.answers import RpcError
from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.config import ChainConfig
from invoicing.chain.fake import FakeChain
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.errors import ChainUnavailable
from invoicing.settings import Settings
from invoicing.settlement.budget import Limits
from invoicing.settlement.relayer import Call, GasCapExceeded, Relayer
from invoicing.tables.settlement import TxPurpose

KEY = "0x" + "11" * 32
CALL = Call(TxPurpose.SET_FEE, "0x" + "fa" * 20, b"\x01\x02")


def relayer_on(chain: FakeChain) -> Relayer:
    settings = Settings(environment="development")
    return Relayer(chain, Database("sqlite:///:memory:"), FakeClock(), Limits.of(settings))


@pytest.fixture
def chain() -> FakeChain:
    return FakeChain(relayer_key=KEY)


async def test_a_capped_estimate_asks_the_node_with_the_cap_and_stays_under_it(
    chain: FakeChain,
) -> None:
    relayer = relayer_on(chain)
    chain.gas_estimate = 60_000
    small = await relayer.simulate(CALL, 200_000)
    chain.gas_estimate = 170_000
    close = await relayer.simulate(CALL, 200_000)
    uncapped = await relayer.simulate(CALL)

    assert chain.gas_caps == [200_000, 200_000, None]
    assert (small, close) == (95_000, 200_000)
    assert uncapped == 232_500


async def test_a_call_that_needs_more_than_the_cap_is_refused(chain: FakeChain) -> None:
    relayer = relayer_on(chain)
    chain.gas_estimate = 18_314_244  # a gas-burning EIP-1271 wallet

    with pytest.raises(GasCapExceeded) as raised:
        await relayer.simulate(CALL, 200_000)

    assert raised.value.gas_cap == 200_000
    assert "gas required exceeds allowance: 200000" in str(raised.value)
    assert chain.sent == []


async def test_an_estimate_over_the_cap_is_refused_even_if_the_node_ignored_the_cap(
    chain: FakeChain,
) -> None:
    class CapIgnoringChain(FakeChain):
        async def estimate_gas(
            self,
            sender: str,
            to: str,
            data: bytes,
            value: int = 0,
            gas_cap: int | None = None,
            fees: dict[str, int] | None = None,
        ) -> int:
            return await super().estimate_gas(sender, to, data, value, None, fees)

    careless = CapIgnoringChain(relayer_key=KEY)
    careless.gas_estimate = 250_000

    with pytest.raises(GasCapExceeded):
        await relayer_on(careless).simulate(CALL, 200_000)


async def test_other_node_errors_of_a_capped_estimate_are_the_chain_being_unavailable(
    chain: FakeChain,
) -> None:
    class RateLimitedNode(FakeChain):
        async def estimate_gas(
            self,
            sender: str,
            to: str,
            data: bytes,
            value: int = 0,
            gas_cap: int | None = None,
            fees: dict[str, int] | None = None,
        ) -> int:
            raise RpcError(-32005, "request limit reached")

    with pytest.raises(ChainUnavailable):
        await relayer_on(RateLimitedNode(relayer_key=KEY)).simulate(CALL, 200_000)


def with_threshold(chain: FakeChain, threshold: int | None) -> FakeChain:
    chain.config = replace(chain.config, relayer_min_balance=threshold)
    return chain


async def test_a_relayer_under_its_threshold_is_short_and_warned_about_once(
    chain: FakeChain, caplog: pytest.LogCaptureFixture
) -> None:
    relayer = relayer_on(with_threshold(chain, 10**16))
    account = relayer.address.lower()
    chain.native[account] = 10**16 - 1

    with caplog.at_level(logging.INFO, logger="invoicing.settlement.relayer"):
        first = await relayer.balance_shortfall()
        second = await relayer.balance_shortfall()
        chain.native[account] = 10**16
        topped_up = await relayer.balance_shortfall()

    assert (
        first
        == second
        == (
            f"relayer {relayer.address} balance 9999999999999999 wei is below the threshold "
            "10000000000000000 wei; withdrawals wait until it is topped up"
        )
    )
    assert topped_up is None
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert messages == [
        ("WARNING", f"relayer chain 31337: {first}"),
        ("INFO", "relayer chain 31337: balance 10000000000000000 is back over 10000000000000000"),
    ]


async def test_no_threshold_reads_no_balance(chain: FakeChain) -> None:
    chain.available = False  # any balance read would fail

    assert await relayer_on(with_threshold(chain, None)).balance_shortfall() is None
    assert await relayer_on(with_threshold(chain, 0)).balance_shortfall() is None


def test_each_chain_takes_the_global_relayer_limits_unless_it_sets_its_own(
    tmp_path: Path,
) -> None:
    chains_file = tmp_path / "chains.toml"
    chains_file.write_text(
        "[[chain]]\nchain_id = 1\nrpc_url = 'http://a'\nfactory = '0x01'\n"
        "max_fee_per_gas = 300_000_000_000\nrelayer_min_balance = 0\n"
        "[[chain]]\nchain_id = 10\nrpc_url = 'http://b'\nfactory = '0x02'\n"
    )
    inline = ChainConfig(chain_id=31337, name="dev", rpc_url="http://c", factory="0x03")

    defaults = Settings(environment="development", chains_file=chains_file, chains=[inline])
    tuned = Settings(
        environment="development",
        chains_file=chains_file,
        relayer_max_fee_per_gas=50 * 10**9,
        relayer_min_balance=10**17,
    )

    limits = {
        i: (c.max_fee_per_gas, c.relayer_min_balance) for i, c in defaults.chain_configs().items()
    }
    assert limits == {
        1: (300 * 10**9, 0),
        10: (200 * 10**9, 10**16),
        31337: (200 * 10**9, 10**16),
    }
    assert (defaults.relayer_meta_gas_limit, defaults.relayer_meta_per_owner_per_day) == (
        250_000,
        20,
    )
    assert tuned.chain_configs()[10].max_fee_per_gas == 50 * 10**9
    assert tuned.chain_configs()[10].relayer_min_balance == 10**17


def test_a_negative_relayer_limit_in_the_chains_file_is_refused(tmp_path: Path) -> None:
    chains_file = tmp_path / "chains.toml"
    chains_file.write_text(
        "[[chain]]\nchain_id = 5\nrpc_url = 'http://a'\nfactory = '0x01'\n"
        "relayer_min_balance = -1\n"
    )

    with pytest.raises(ValueError, match="chain 5: relayer_min_balance must not be negative"):
        load_chains_file(chains_file)


async def test_a_simulation_carries_the_fee_fields_of_the_send(chain: FakeChain) -> None:
    """A contract that behaves otherwise at another gas price (``tx.gasprice`` 0 in a
    fee-less estimate) is judged at the price its transaction will pay."""
    relayer = relayer_on(chain)
    chain.max_fee_per_gas, chain.max_priority_fee_per_gas = 7 * 10**9, 2 * 10**9
    await relayer.simulate(CALL, 200_000)
    chain.eip1559_fees = False
    await relayer.simulate(CALL)

    assert chain.simulated_fees == [
        {"type": 2, "maxFeePerGas": 7 * 10**9, "maxPriorityFeePerGas": 2 * 10**9},
        {"gasPrice": 7 * 10**9},
    ]
