"""A logo is decoded in a child process under limits (docs/security.md#logos): a file of many
JPEG scans is refused from its bytes, a decode past its CPU or wall time is killed and
refused, the event loop runs meanwhile, and no more than ``at_once`` decodes run at once."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from invoicing.brand.logo import MAX_JPEG_SCANS, LogoProblem, screen_logo
from invoicing.brand.logo_process import DecodeLimits, DecodersBusy, reencoded_in_child
from invoicing.brand.service import decode_logo
from invoicing.errors import InvalidRequest, RateLimited
from tests.support.hostile_images import many_scan_jpeg

# 7,000 scans of a 2,048-pixel square: 128,590 bytes, many seconds of libjpeg's CPU.
HOSTILE = many_scan_jpeg(7000)
# Room for start-up on a loaded machine, where one CPU second can take several of the wall.
SLOW = DecodeLimits(cpu_s=1, wall_s=60)


def children() -> set[int]:
    """The ids of this process's child processes (Linux)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def image_file(fmt: str, size: tuple[int, int] = (48, 24), **options: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (26, 107, 60)).save(out, format=fmt, **options)
    return out.getvalue()


def test_a_jpeg_of_more_scans_than_the_limit_is_refused_from_its_bytes() -> None:
    started = time.perf_counter()
    with pytest.raises(LogoProblem) as refused:
        screen_logo(many_scan_jpeg(MAX_JPEG_SCANS + 1))

    assert (str(refused.value), refused.value.reason) == (
        "must have at most 100 JPEG scans",
        "too_many_scans",
    )
    assert len(HOSTILE) <= 128 * 1024 and HOSTILE.count(b"\xff\xda") == 7000
    with pytest.raises(LogoProblem, match="at most 100 JPEG scans"):
        screen_logo(HOSTILE)
    assert time.perf_counter() - started < 1


async def test_a_jpeg_of_as_many_scans_as_the_limit_is_a_logo() -> None:
    data = many_scan_jpeg(MAX_JPEG_SCANS)
    screen_logo(data)

    png = await reencoded_in_child(data)

    with Image.open(io.BytesIO(png)) as image:
        assert (image.format, image.size, image.getpixel((0, 0))) == (
            "PNG",
            (256, 256),
            (128, 128, 128),
        )


async def test_a_decode_past_its_cpu_limit_is_killed_and_refused() -> None:
    before = children()

    with pytest.raises(LogoProblem) as refused:
        await reencoded_in_child(HOSTILE, SLOW)

    assert (str(refused.value), refused.value.reason) == (
        "took more than 1 s of CPU to decode",
        "decode_time",
    )
    assert children() <= before


async def test_a_decode_past_its_wall_time_is_killed_and_refused() -> None:
    before = children()
    started = time.perf_counter()

    with pytest.raises(LogoProblem) as refused:
        await reencoded_in_child(HOSTILE, DecodeLimits(cpu_s=60, wall_s=0.5))

    assert (str(refused.value), refused.value.reason) == (
        "took more than 0.5 s to decode",
        "decode_time",
    )
    assert time.perf_counter() - started < 5  # the child did not run its 10 s or more
    assert children() <= before


async def test_the_event_loop_runs_while_a_logo_decodes() -> None:
    gaps: list[float] = []

    async def tick() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            gaps.append(time.perf_counter() - started)

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(LogoProblem, match="took more than"):
            await reencoded_in_child(HOSTILE, SLOW)
    finally:
        ticker.cancel()

    assert len(gaps) > 20 and max(gaps) < 0.5


async def test_one_decode_more_than_at_once_is_refused_until_a_slot_frees() -> None:
    limits = DecodeLimits(cpu_s=60, wall_s=1.5, at_once=2)
    slow = [asyncio.create_task(reencoded_in_child(HOSTILE, limits)) for _ in range(2)]
    await asyncio.sleep(0)  # both have taken their slots

    with pytest.raises(DecodersBusy):
        await reencoded_in_child(image_file("PNG"), limits)
    for task in slow:
        with pytest.raises(LogoProblem, match="took more than 1.5 s"):
            await task
    assert (await reencoded_in_child(image_file("PNG"), limits)).startswith(b"\x89PNG")


async def test_the_api_answers_429_while_every_slot_decodes() -> None:
    limits = DecodeLimits(cpu_s=60, wall_s=1.5)
    slow = [asyncio.create_task(reencoded_in_child(HOSTILE, limits)) for _ in range(2)]
    await asyncio.sleep(0)

    with pytest.raises(RateLimited) as refused:
        await decode_logo(base64.b64encode(image_file("PNG")).decode())

    assert (refused.value.code, refused.value.retry_after_s) == ("rate_limited", 1)
    for task in slow:
        with pytest.raises(LogoProblem):
            await task


async def test_the_api_refuses_the_hostile_jpeg_as_an_invalid_logo() -> None:
    with pytest.raises(InvalidRequest) as refused:
        await decode_logo(base64.b64encode(HOSTILE).decode())

    assert refused.value.body() == {
        "error": {
            "code": "invalid_request",
            "message": "logo must have at most 100 JPEG scans",
            "details": {"field": "logo", "reason": "too_many_scans"},
        }
    }


GOOD = {
    "PNG": image_file("PNG", (30, 30)),
    "JPEG": image_file("JPEG", (30, 30), progressive=True),
    "WEBP": image_file("WEBP", (30, 30)),
}


async def _decoded_or_refused(data: bytes) -> None:
    """The service's own path (base64 field, screen, child) ends in a PNG or in a 400 of the
    logo field, within the wall-time limit and its start-up."""
    started = time.perf_counter()
    try:
        png = await decode_logo(base64.b64encode(data).decode())
    except InvalidRequest as refused:
        assert refused.code == "invalid_request"
        assert refused.details is not None and refused.details["field"] == "logo"
    else:
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert time.perf_counter() - started < 5 + 5


MAGIC = [b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF\x00\x00\x00\x00WEBP"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MAGIC), st.binary(max_size=4096))
async def test_any_bytes_are_a_logo_or_a_refusal(magic: bytes, rest: bytes) -> None:
    await _decoded_or_refused(magic + rest)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(GOOD)),
    st.integers(min_value=0, max_value=400),
    st.binary(min_size=1, max_size=64),
    st.booleans(),
)
async def test_a_damaged_png_jpeg_or_webp_is_a_logo_or_a_refusal(
    fmt: str, at: int, noise: bytes, insert: bool
) -> None:
    good = GOOD[fmt]
    at = min(at, len(good))
    damaged = good[:at] + noise + good[at + (0 if insert else len(noise)) :]

    await _decoded_or_refused(damaged)
