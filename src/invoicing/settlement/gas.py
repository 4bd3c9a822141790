"""What a relayer transaction may ask for in gas and fees: the gas limit over an estimate
(with headroom, never above the protocol's cap), the fees of a first send under the chain's
ceiling, and the bumped fees of a replacement (``settlement.relayer`` applies them).
"""

from __future__ import annotations

# EIP-7825: no transaction may ask for more gas than this.
TX_GAS_CAP = 16_777_216
# Headroom over the estimate: state can change between simulation and inclusion.
GAS_MARGIN_NUM, GAS_MARGIN_DEN = 5, 4
GAS_MARGIN_FLAT = 20_000


def bump(value: int) -> int:
    """A fee raised by 12.5% (rounded up): above the 10% nodes require for a replacement."""
    return value + (value + 7) // 8


def min_replacement(value: int) -> int:
    """The lowest fee a node takes as a replacement of one at ``value``: 10% more."""
    return (value * 11 + 9) // 10


def capped_fees(max_fee: int, tip: int, ceiling: int | None) -> tuple[int, int]:
    """(maxFeePerGas, tip) of a first send: the market's, but never above the ceiling."""
    if ceiling is not None:
        max_fee = min(max_fee, ceiling)
    return max_fee, min(tip, max_fee)


def replacement_fees(
    old: tuple[int, int], market: tuple[int, int], ceiling: int | None
) -> tuple[int, int] | None:
    """(maxFeePerGas, tip) to replace a transaction sent at ``old``: bumped 12.5% or the
    market's if higher, capped at the ceiling. None when the cap leaves no valid replacement
    (both must rise by 10%): the transaction waits at the fees it has."""
    new_max_fee = max(bump(old[0]), market[0])
    if ceiling is not None:
        new_max_fee = min(new_max_fee, ceiling)
    new_tip = min(max(bump(old[1]), market[1]), new_max_fee)
    if new_max_fee < min_replacement(old[0]) or new_tip < min_replacement(old[1]):
        return None
    return new_max_fee, new_tip


def gas_limit(estimate: int, cap: int = TX_GAS_CAP) -> int:
    """The estimate with headroom, never above ``cap``."""
    return min(cap, estimate * GAS_MARGIN_NUM // GAS_MARGIN_DEN + GAS_MARGIN_FLAT)
