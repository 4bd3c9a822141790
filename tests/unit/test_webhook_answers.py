"""Whatever a webhook receiver answers is parsed safely (property-based): the answer's head
is an ``AnswerHead`` within every bound or a ``ProtocolError``, and a whole exchange with a
real local server ends in an outcome the attempt row can store, never in an exception."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing.notifications.client import Delivery, Outcome
from invoicing.notifications.delivery import MAX_ERROR_CHARS
from invoicing.outbound.http11 import (
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    AnswerHead,
    ProtocolError,
    parse_head,
)
from tests.support.local_http import LocalServer, make_client

TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-!#$%&'*+.^_`|~"
TOKEN = st.text(TOKEN_CHARS, min_size=1, max_size=30)
VALUE = st.binary(max_size=60).filter(lambda v: b"\r" not in v and b"\n" not in v)


@st.composite
def near_heads(draw: st.DrawFn) -> bytes:
    """Heads that are HTTP-shaped, with a stranger's status codes, versions and headers."""
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.x", b"HTTP/2", b"http/1.1"]))
    status = draw(
        st.one_of(
            st.integers(0, 10**25).map(lambda n: str(n).encode()),
            st.text("0123456789\u00b2\u00b3\u00b9\u0660 -+", max_size=6).map(
                lambda t: t.encode("utf-8")
            ),
        )
    )
    reason = draw(st.sampled_from([b"", b" OK", b" ", b" \x00\x7f"]))
    names = draw(st.lists(st.one_of(TOKEN.map(str.encode), st.binary(max_size=10)), max_size=5))
    lines = [version + b" " + status + reason]
    lines += [name + b":" + draw(VALUE) for name in names]
    if draw(st.booleans()):
        lines.append(b"Content-Length: " + draw(st.sampled_from([b"0", b"-1", b"\xb2", b"9" * 30])))
    return b"\r\n".join(lines) + b"\r\n\r\n"


ANSWERS = st.one_of(st.binary(max_size=300), near_heads(), near_heads().map(lambda h: h + h))


@given(st.one_of(st.binary(max_size=2000), near_heads()))
def test_a_head_is_parsed_within_its_bounds_or_refused(head: bytes) -> None:
    try:
        answer = parse_head(head)
    except ProtocolError as exc:
        assert str(exc)
        return
    assert isinstance(answer, AnswerHead)
    assert 100 <= answer.status <= 599
    assert answer.version in ("HTTP/1.0", "HTTP/1.1")
    assert len(answer.headers) <= MAX_HEADERS
    assert len(head) <= MAX_HEAD_BYTES


@given(
    st.integers(100, 599),
    st.lists(st.tuples(TOKEN, st.text("abc XYZ09;=,", max_size=20)), max_size=10),
)
def test_a_well_formed_head_is_read_as_sent(status: int, headers: list[tuple[str, str]]) -> None:
    lines = [f"HTTP/1.1 {status} Reason"] + [f"{n}: {v}" for n, v in headers]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()

    answer = parse_head(head)

    assert (answer.version, answer.status) == ("HTTP/1.1", status)
    assert answer.headers == {n.lower(): v.strip().lower() for n, v in headers}


@pytest.mark.parametrize(
    ("head", "error"),
    [
        (b"HTTP/1.1 99999999999999999999 OK\r\n\r\n", "the status code is not three digits"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "the status code is not three digits"),
        (b"HTTP/1.1 20 OK\r\n\r\n", "the status code is not three digits"),
        (b"HTTP/1.1 099 OK\r\n\r\n", "the status code 99 is not between 100 and 599"),
        (b"HTTP/1.1 600 OK\r\n\r\n", "the status code 600 is not between 100 and 599"),
        (b"HTTP/1.1 \xb200 OK\r\n\r\n", "not an HTTP/1.x status line: 'HTTP/1.1 \xb200 OK'"),
        (b"HTTP/1.1 200 " + b"O" * 1100 + b"\r\n\r\n", "the status line is longer than 1024 bytes"),
        (
            b"HTTP/1.1 200 OK\r\n" + b"A: b\r\n" * 101 + b"\r\n",
            "the answer has more than 100 headers",
        ),
        (b"HTTP/1.1 200 OK\r\n folded\r\n\r\n", "not a header line: ' folded'"),
        (b"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n", "not a header line: 'No colon'"),
    ],
)
def test_heads_that_are_refused(head: bytes, error: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_head(head)

    assert str(refused.value) == error


async def _exchange(answer: bytes) -> Outcome:
    local = LocalServer(answer=answer, answers_per_connection=1)
    listener = await asyncio.start_server(local.handle, "127.0.0.1", 0)
    local.port = listener.sockets[0].getsockname()[1]
    client = make_client(local, "93.184.216.34", timeout_s=2.0)
    try:
        return await client.send(Delivery("http://hooks.example/", b"{}", {}))
    finally:
        await client.aclose()
        listener.close()
        await listener.wait_closed()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANSWERS)
def test_any_answer_ends_in_an_outcome_an_attempt_row_can_store(answer: bytes) -> None:
    outcome = asyncio.run(_exchange(answer))

    if outcome.status_code is not None:
        assert 100 <= outcome.status_code <= 599
        assert outcome.error is None
    else:
        assert outcome.error is not None
        assert len(outcome.error) <= MAX_ERROR_CHARS
        assert "\x00" not in outcome.error
    assert outcome.timed_out is False
