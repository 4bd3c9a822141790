"""What the JSON-RPC client takes from providers' answers: quantities, the head it believes,
and the redacted form of a URL (``chain.answers``, ``chain.heads``, ``chain.urls``), checked over
generated inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.chain.answers import quantity
from invoicing.chain.heads import HeadBelief, lead_for
from invoicing.chain.urls import redact_url

heads = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=5)


@given(st.integers(min_value=0, max_value=2**256 - 1))
def test_every_quantity_reads_back(value: int) -> None:
    assert quantity(hex(value)) == value
    assert quantity(hex(value).upper().replace("0X", "0x")) == value


@given(st.one_of(st.text(max_size=80), st.integers(), st.none(), st.floats(), st.lists(st.text())))
def test_anything_else_a_provider_sends_is_refused_or_a_plain_hex_number(answer: object) -> None:
    try:
        value = quantity(answer)
    except ValueError:
        return
    assert isinstance(answer, str)
    assert value == int(answer, 16) and 0 <= value < 2**256


@pytest.mark.parametrize(
    "answer", ["-0x1", "0x", "0x-1", " 0x1", "0x1 ", "1", "0x_1", "0x" + "f" * 65]
)
def test_signs_blanks_and_oversize_are_refused(answer: str) -> None:
    with pytest.raises(ValueError):
        quantity(answer)


def believe(rounds: list[tuple[list[int], float]]) -> list[int]:
    """The believed head after each round of answers (heads, monotonic time)."""
    belief, believed = HeadBelief(lead_max_blocks=16, max_blocks_per_s=5.0), []
    for answers, now in rounds:
        belief = belief.after(answers, now)
        believed.append(belief.believed)
    return believed


rounds = st.lists(
    st.tuples(heads, st.floats(min_value=0, max_value=1.0e4)), min_size=1, max_size=8
).map(lambda rs: [(answers, float(i) + t / 1.0e4) for i, (answers, t) in enumerate(rs)])


@given(rounds)
def test_the_believed_head_never_falls_and_never_runs_ahead_of_a_second_url_or_the_pace(
    answers_in_time: list[tuple[list[int], float]],
) -> None:
    believed = believe(answers_in_time)

    assert believed == sorted(believed)  # never goes down
    anchor, anchor_at, before = 0, 0.0, 0
    for (answers, now), head in zip(answers_in_time, believed, strict=True):
        ordered = sorted(answers, reverse=True)
        seconded = ordered[1] if len(ordered) > 1 else (ordered[0] if anchor == 0 else 0)
        if seconded > anchor:
            anchor, anchor_at = seconded, now
        assert head >= seconded
        assert head <= anchor + 16 + int((now - anchor_at) * 5.0)
        assert head in answers or head in (before, anchor)
        before = head


def test_a_lone_head_far_ahead_is_held_until_the_pace_allows_it() -> None:
    assert believe([([100, 1100], 0.0)]) == [100]
    assert believe([([100, 110], 0.0)]) == [110]
    # The other URL goes down: the liar alone is held to 5 blocks a second.
    assert believe([([100, 100], 0.0), ([1100], 10.0), ([1100], 200.0)]) == [100, 100, 1100]
    assert believe([([100, 1100], 0.0), ([1100, 1099], 1.0)]) == [100, 1100]  # seconded


def test_a_head_that_creeps_ahead_of_the_other_url_is_held_to_the_lead() -> None:
    """A liar that reports the believed head plus the lead at every read does not run away:
    the allowance counts from the head two URLs reported, not from the last believed."""
    liar = [([100, 100 + 16 * step], float(step) / 100) for step in range(1, 6)]
    assert believe(liar) == [116, 116, 116, 116, 116]


def test_a_url_stuck_behind_does_not_hold_the_chain_for_long() -> None:
    """One URL stays at block 100 while the chain makes 2 blocks a second: the other URL's
    head is believed all along, within the lead at first, then within the pace."""
    stuck = [([100, 100 + 2 * step], float(step)) for step in range(1, 31)]
    assert believe(stuck) == [100 + 2 * step for step in range(1, 31)]


@given(rounds)
def test_reads_never_fall_and_stay_at_a_head_a_second_url_reports(
    answers_in_time: list[tuple[list[int], float]],
) -> None:
    """Read head: never down, never above the believed head, and with two quorum URLs never
    above the second-highest head of that round or one read at before."""
    belief, before = HeadBelief(lead_max_blocks=16, max_blocks_per_s=5.0), 0
    for answers, now in answers_in_time:
        belief = belief.after(answers, now)
        ordered = sorted(answers, reverse=True)
        assert before <= belief.read_head <= belief.believed
        if len(ordered) > 1:
            assert belief.read_head <= max(before, ordered[1])
        before = belief.read_head


def test_a_url_ahead_is_believed_but_not_read_at() -> None:
    """The liar reports the honest head plus the lead: believed (within the lead), but reads
    stay at the honest URL's head; a lone answer (the other URL out) is read at."""
    belief = HeadBelief(lead_max_blocks=6, max_blocks_per_s=5.0).after([100, 100], 0.0)
    belief = belief.after([106, 101], 0.1)
    assert (belief.believed, belief.read_head) == (106, 101)
    assert belief.after([107], 0.2).read_head == 107


@given(st.integers(min_value=1, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_one_urls_lead_is_at_most_half_the_confirmations(confirmations: int, cap: int) -> None:
    lead = lead_for(confirmations, cap)
    assert lead <= cap and lead >= min(cap, 1)
    assert confirmations == 1 or 2 * lead <= confirmations


def test_the_lead_of_registry_depths() -> None:
    assert [lead_for(c, 16) for c in (1, 2, 3, 12, 20, 64)] == [1, 1, 1, 6, 10, 16]


@given(
    st.sampled_from(["https", "http", "wss"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,6}){1,2}", fullmatch=True),
    st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", min_size=12, max_size=40),
    st.sampled_from(["path", "query", "user", "password"]),
)
def test_a_redacted_url_keeps_the_host_and_never_the_key(
    scheme: str, host: str, key: str, where: str
) -> None:
    url = {
        "path": f"{scheme}://{host}/v2/{key}",
        "query": f"{scheme}://{host}/rpc?apikey={key}",
        "user": f"{scheme}://{key}@{host}",
        "password": f"{scheme}://user:{key}@{host}:8545/",
    }[where]

    shown = redact_url(url)

    assert key not in shown
    port = ":8545" if where == "password" else ""
    assert shown == f"{scheme}://{host}{port}/…"


def test_a_url_with_nothing_to_hide_is_shown_whole_and_garbage_not_at_all() -> None:
    assert redact_url("http://127.0.0.1:8545") == "http://127.0.0.1:8545/"
    assert redact_url("http://[::1]:8545/key") == "http://[::1]:8545/…"
    assert redact_url("not a url with a KEY") == "…"
