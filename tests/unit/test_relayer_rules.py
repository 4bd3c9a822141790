"""Relayer and batching rules that need no chain: fee bumps and their ceiling, gas limits and
the meta-transaction cap, batch sizes."""

from __future__ import annotations

from invoicing.chain.fake import FakeChain
from invoicing.settlement.candidates import MAX_ESCROWS_PER_TX, group_batches, max_batch
from invoicing.settlement.gas import (
    TX_GAS_CAP,
    bump,
    capped_fees,
    gas_limit,
    min_replacement,
    replacement_fees,
)
from invoicing.tables.invoices import Invoice


def test_replacement_fees_rise_by_at_least_ten_percent() -> None:
    for fee in (1, 7, 8, 10, 999, 10**9, 3 * 10**10 + 1):
        assert bump(fee) * 10 >= fee * 11
        assert bump(fee) > fee
    assert bump(10**9) == 1_125_000_000


def test_gas_limit_has_headroom_and_never_exceeds_the_cap() -> None:
    assert gas_limit(100_000) == 145_000
    assert gas_limit(20_000_000) == TX_GAS_CAP


def test_batches_stay_under_the_gas_cap() -> None:
    assert MAX_ESCROWS_PER_TX * 60_000 + 200_000 <= TX_GAS_CAP
    assert max_batch(100) == 100
    assert max_batch(10_000) == MAX_ESCROWS_PER_TX
    assert max_batch(0) == 1


def invoice(n: int, owner: str, token: str | None) -> Invoice:
    return Invoice(
        id=f"id-{n}",
        owner_key=owner.lower(),
        owner_address=owner,
        token_address=token,
        salt="0x" + f"{n:064x}",
        payment_address="0x" + f"{n:040x}",
    )


def test_batches_group_by_owner_and_token() -> None:
    a, b, token = "0x" + "aa" * 20, "0x" + "bb" * 20, "0x" + "cC" * 20
    invoices = [invoice(1, a, None), invoice(2, a, token), invoice(3, b, None),
                invoice(4, a, None), invoice(5, a, token.lower()), invoice(6, a, None)]  # fmt: skip

    batches = group_batches(FakeChain(), invoices, 2)

    assert [(x.owner_address, x.token_address, [i.id for i in x.invoices]) for x in batches] == [
        (a, None, ["id-1", "id-4"]),
        (a, None, ["id-6"]),
        (a, token, ["id-2", "id-5"]),
        (b, None, ["id-3"]),
    ]
    assert {x.factory for x in batches} == {FakeChain().factory}


def test_escrows_a_previous_factory_made_are_swept_in_batches_of_their_own_to_it() -> None:
    a, previous = "0x" + "aa" * 20, "0x" + "9F" * 20
    chain = FakeChain()
    invoices = [invoice(n, a, None) for n in range(1, 6)]
    chain.escrow_factories = {invoices[1].payment_address: previous}
    chain.escrow_factories[invoices[3].payment_address] = previous

    batches = group_batches(chain, invoices, 2)

    assert [(x.factory, [i.id for i in x.invoices]) for x in batches] == [
        (chain.factory, ["id-1", "id-3"]),
        (chain.factory, ["id-5"]),
        (previous, ["id-2", "id-4"]),
    ]


GWEI = 10**9


def test_a_first_send_never_offers_more_than_the_ceiling() -> None:
    assert capped_fees(30 * GWEI, 2 * GWEI, None) == (30 * GWEI, 2 * GWEI)
    assert capped_fees(30 * GWEI, 2 * GWEI, 50 * GWEI) == (30 * GWEI, 2 * GWEI)
    assert capped_fees(80 * GWEI, 2 * GWEI, 50 * GWEI) == (50 * GWEI, 2 * GWEI)
    assert capped_fees(80 * GWEI, 60 * GWEI, 50 * GWEI) == (50 * GWEI, 50 * GWEI)


def test_a_replacement_is_bumped_up_to_the_ceiling_and_no_further() -> None:
    old = (40 * GWEI, 2 * GWEI)
    quiet_market = (10 * GWEI, GWEI)

    assert replacement_fees(old, quiet_market, None) == (45 * GWEI, 2_250_000_000)
    assert replacement_fees(old, (70 * GWEI, 3 * GWEI), None) == (70 * GWEI, 3 * GWEI)
    assert replacement_fees(old, (70 * GWEI, 3 * GWEI), 60 * GWEI) == (60 * GWEI, 3 * GWEI)
    # 44 gwei is exactly the 10% a node needs; 43.9 is not.
    assert replacement_fees(old, quiet_market, 44 * GWEI) == (44 * GWEI, 2_250_000_000)
    assert replacement_fees(old, quiet_market, 44 * GWEI - 1) is None
    assert replacement_fees(old, (70 * GWEI, 3 * GWEI), 40 * GWEI) is None  # at the ceiling
    assert replacement_fees(old, quiet_market, 30 * GWEI) is None  # ceiling lowered since


def test_a_replacement_needs_ten_percent_more_tip_too() -> None:
    # The tip is already the whole fee: at the ceiling there is no room to raise it.
    assert replacement_fees((40 * GWEI, 40 * GWEI), (40 * GWEI, 40 * GWEI), 43 * GWEI) is None
    assert replacement_fees((40 * GWEI, 40 * GWEI), (0, 0), 44 * GWEI) == (44 * GWEI, 44 * GWEI)
    assert [min_replacement(v) for v in (1, 9, 10, 11, 10**9)] == [2, 10, 11, 13, 1_100_000_000]


def test_a_meta_transaction_gas_limit_stays_under_its_cap() -> None:
    assert gas_limit(60_000, 200_000) == 95_000
    assert gas_limit(150_000, 200_000) == 200_000
