"""Which head a JSON-RPC client over several URLs believes, and at which head it reads.

Heads are not taken on one URL's word (``JsonRpc.head`` in ``chain.rpc`` asks every URL).
The URLs that answered, less those that lag (far behind the others with a head block older
than the chain can be: ``JsonRpc`` leaves them out), form the quorum:

- a head is believed when a second quorum URL reports it too, or when it is no further ahead
  of the last head two quorum URLs reported than ``lead_max_blocks`` (at most half the
  chain's confirmation depth) plus ``max_blocks_per_s`` for every second since then: a
  provider cannot run ahead of the others, by a jump or by creeping, while a URL that stopped
  answering does not hold the chain back for long;
- reads happen at the ``read_head``: the lower of the believed head and the second-highest
  quorum head, so every block read at was reported by two URLs while two are in the quorum.

A URL that lags leaves the quorum rather than anchoring it: it holds neither the belief nor
the reads back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


def lead_for(confirmations: int, lead_max_blocks: int) -> int:
    """How far one URL's head may run ahead of the others: at most half the confirmation
    depth (at least one block), and never above the ``lead_max_blocks`` setting, so a block
    only one URL reports is never at the depth where its balances count."""
    return min(lead_max_blocks, max(1, confirmations // 2))


@dataclass(frozen=True)
class HeadBelief:
    """The believed head, the head reads happen at, and the rule that moves them.

    ``anchor`` is the highest head that two quorum URLs have reported (or the first head, before
    any second answer), and ``anchor_at`` when it last rose (monotonic seconds). A head that
    only one URL reports is believed only up to the anchor plus ``lead_max_blocks`` plus
    ``max_blocks_per_s`` for every second since ``anchor_at``."""

    lead_max_blocks: int
    max_blocks_per_s: float
    believed: int = 0
    read_head: int = 0
    anchor: int = 0
    anchor_at: float = 0.0

    def after(self, quorum: Sequence[int], now: float) -> HeadBelief:
        """The belief once the quorum URLs answered ``quorum`` at ``now``; it never goes
        down."""
        ordered = sorted(quorum, reverse=True)
        if not ordered:
            return self
        anchor, anchor_at = self.anchor, self.anchor_at
        if len(ordered) > 1 and ordered[1] > anchor:
            anchor, anchor_at = ordered[1], now
        elif len(ordered) == 1 and anchor == 0:
            anchor, anchor_at = ordered[0], now  # a first answer, and no second one
        paced = int(max(0.0, now - anchor_at) * self.max_blocks_per_s)
        allowed = anchor + self.lead_max_blocks + paced
        believed = max([self.believed, anchor, *(h for h in ordered if h <= allowed)])
        seconded = ordered[1] if len(ordered) > 1 else believed
        read_head = max(self.read_head, min(believed, seconded))
        return replace(
            self, believed=believed, read_head=read_head, anchor=anchor, anchor_at=anchor_at
        )
