"""What the JSON-RPC client takes from providers' answers: quantities, the head it believes,
and the redacted form of a URL (``chain.rpc``), checked over generated inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.chain.rpc import RpcPolicy, believed_head, quantity, redact_url

POLICY = RpcPolicy(head_lead_max_blocks=64, head_max_blocks_per_s=5.0)
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


@given(heads, st.integers(min_value=0, max_value=10**12), st.floats(min_value=0, max_value=10**4))
def test_the_believed_head_never_falls_and_never_runs_ahead_of_a_second_url_or_the_pace(
    answers: list[int], best: int, still_s: float
) -> None:
    believed = believed_head(answers, best, still_s, POLICY)

    assert believed >= best
    assert believed == best or believed in answers
    ordered = sorted(answers, reverse=True)
    if best == 0 and len(answers) == 1:
        assert believed == answers[0]
        return
    seconded = ordered[1] if len(ordered) > 1 else 0
    assert believed >= seconded
    pace = 64 + int(still_s * 5.0)
    assert believed <= max(best, seconded) + pace


def test_a_lone_head_far_ahead_is_held_until_the_pace_allows_it() -> None:
    assert believed_head([100, 1100], 0, 0.0, POLICY) == 100
    assert believed_head([100, 130], 0, 0.0, POLICY) == 130
    assert believed_head([1100], 100, 10.0, POLICY) == 100
    assert believed_head([1100], 100, 200.0, POLICY) == 1100  # 100 + 64 + 1000
    assert believed_head([1100, 1099], 100, 0.0, POLICY) == 1100  # a second URL agrees


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
