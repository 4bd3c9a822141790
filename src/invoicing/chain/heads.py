"""Which head a JSON-RPC client over several URLs believes.

Heads are not taken on one URL's word (``JsonRpc.head`` in ``chain.rpc`` asks every URL): a
head is believed when a second URL reports it too, or when it is no further ahead of the last
such head than the chain's pace allows (``head_lead_max_blocks``, plus
``head_max_blocks_per_s`` for every second since that head rose). A provider cannot run
ahead of the other URLs faster than the chain's pace, whether it jumps or creeps, while a
URL stuck behind does not hold the chain back for long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class HeadBelief:
    """The believed head, and the rule that moves it.

    ``anchor`` is the highest head that two URLs have reported (or the first head, before any
    second answer), and ``anchor_at`` when it last rose (monotonic seconds). A head that only
    one URL reports is believed only up to the anchor plus ``lead_max_blocks`` plus
    ``max_blocks_per_s`` for every second since the anchor rose."""

    lead_max_blocks: int
    max_blocks_per_s: float
    believed: int = 0
    anchor: int = 0
    anchor_at: float = 0.0

    def after(self, heads: Sequence[int], now: float) -> HeadBelief:
        """The belief once the URLs answered ``heads`` at ``now``; it never goes down."""
        ordered = sorted(heads, reverse=True)
        if not ordered:
            return self
        anchor, anchor_at = self.anchor, self.anchor_at
        seconded = ordered[1] if len(ordered) > 1 else None
        if seconded is None and anchor == 0:
            seconded = ordered[0]  # a first answer, and no second one to compare it with
        if seconded is not None and seconded > anchor:
            anchor, anchor_at = seconded, now
        paced = int(max(0.0, now - anchor_at) * self.max_blocks_per_s)
        allowed = anchor + self.lead_max_blocks + paced
        believed = max([self.believed, anchor, *(h for h in ordered if h <= allowed)])
        return replace(self, believed=believed, anchor=anchor, anchor_at=anchor_at)
