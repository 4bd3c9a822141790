"""The brand's parts without a server: accent colours (any text a stranger sends) and the
logo's decoding and re-encoding (any bytes)."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from invoicing.brand.colors import (
    AA_NORMAL_TEXT,
    BLACK,
    WHITE,
    ColorProblem,
    contrast,
    parse_color,
    text_color_on,
)
from invoicing.brand.logo import (
    MAX_LOGO_BYTES,
    STORED_SIDE,
    LogoProblem,
    reencode_logo,
    screen_logo,
)

HEX6 = re.compile(r"#[0-9a-fA-F]{6}")


@given(st.integers(min_value=0, max_value=0xFFFFFF))
def test_every_colour_gets_a_text_colour_with_aa_contrast(value: int) -> None:
    accent = f"#{value:06x}"

    text = text_color_on(accent)

    assert text in (BLACK, WHITE)
    assert contrast(text, accent) >= AA_NORMAL_TEXT
    assert contrast(text, accent) >= contrast(BLACK if text == WHITE else WHITE, accent)


@given(st.text(max_size=20))
def test_a_colour_is_exactly_hash_and_six_hex_digits(text: str) -> None:
    if HEX6.fullmatch(text):
        assert parse_color(text) == text.lower()
    else:
        with pytest.raises(ColorProblem):
            parse_color(text)


@pytest.mark.parametrize(
    "text", ["", "#fff", "1a6b3c", "#1a6b3c ", " #1a6b3c", "#1a6b3g", "red", "rgb(1,2,3)",
             "#1a6b3c00", "#１a6b3c", "#1a6b3c;}body{x", "url(x)"],
)  # fmt: skip
def test_bad_colours(text: str) -> None:
    with pytest.raises(ColorProblem):
        parse_color(text)


def test_known_contrasts() -> None:
    assert round(contrast(BLACK, WHITE), 2) == 21.0
    assert text_color_on("#ffd400") == BLACK  # yellow: black text
    assert text_color_on("#1a6b3c") == WHITE  # dark green: white text
    assert text_color_on("#777777") == BLACK  # the mid grey: black (4.69) beats white (4.48)


def checked(data: bytes) -> bytes:
    """What the service does with a logo, in this process: the bytes screened, then decoded
    and re-encoded (the service decodes in a child process: test_brand_logo_limits)."""
    screen_logo(data)
    return reencode_logo(data)


def image_file(fmt: str, size: tuple[int, int] = (40, 20), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, (200, 30, 60, 128)[: len(mode)]).save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_png_jpeg_and_webp_come_back_as_a_png_of_the_same_picture(fmt: str) -> None:
    png = reencode_logo(image_file(fmt))

    with Image.open(io.BytesIO(png)) as image:
        assert (image.format, image.size, image.mode) == ("PNG", (40, 20), "RGB")
        red, green, blue = image.getpixel((10, 10))  # type: ignore[misc]
        assert abs(red - 200) < 8 and abs(green - 30) < 8 and abs(blue - 60) < 8


def test_transparency_is_kept_and_a_large_logo_is_scaled_down() -> None:
    png = reencode_logo(image_file("PNG", (1024, 512), "RGBA"))

    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == "RGBA" and image.size == (STORED_SIDE, STORED_SIDE // 2)


def test_metadata_does_not_survive() -> None:
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="PNG", pnginfo=_text_chunk("<script>x</script>"))
    png = reencode_logo(out.getvalue())

    assert b"<script>" not in png
    with Image.open(io.BytesIO(png)) as image:
        assert image.info.get("Comment") is None


def _text_chunk(text: str) -> PngInfo:
    info = PngInfo()
    info.add_text("Comment", text)
    return info


SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>alert(1)</script></svg>"
)


NOT_AN_IMAGE = ("must be a PNG, JPEG or WebP image", "unsupported_format")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (SVG, NOT_AN_IMAGE),
        (b"<?xml version='1.0'?>" + SVG, NOT_AN_IMAGE),
        (image_file("GIF"), NOT_AN_IMAGE),
        (image_file("BMP"), NOT_AN_IMAGE),
        (b"%PDF-1.7\n", NOT_AN_IMAGE),
        (b"\xff\xd8\xff" + SVG, NOT_AN_IMAGE),  # JPEG's magic bytes, and no JPEG
        (b"", ("is empty", "empty")),
        (
            image_file("PNG")[:60],
            ("could not be decoded as a PNG, JPEG or WebP image", "undecodable"),
        ),
        (b"\x00" * (MAX_LOGO_BYTES + 1), ("must be at most 128 KiB", "too_large")),
        (image_file("PNG", (4000, 10)), ("must be at most 2048 pixels a side", "too_many_pixels")),
    ],
)
def test_refused_logos(data: bytes, problem: tuple[str, str]) -> None:
    with pytest.raises(LogoProblem) as refused:
        checked(data)
    assert (str(refused.value), refused.value.reason) == problem


def test_an_image_just_under_the_size_limit_is_accepted_one_byte_over_is_not() -> None:
    png = image_file("PNG")
    padded = png + b"\x00" * (MAX_LOGO_BYTES - len(png))  # trailing bytes after IEND

    assert len(padded) == MAX_LOGO_BYTES
    assert checked(padded).startswith(b"\x89PNG")
    with pytest.raises(LogoProblem, match="at most 128 KiB"):
        checked(padded + b"\x00")


@settings(max_examples=200)
@given(st.binary(max_size=2048))
def test_any_bytes_are_a_logo_or_a_logo_problem(data: bytes) -> None:
    try:
        png = checked(data)
    except LogoProblem:
        return
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


@settings(max_examples=100)
@given(st.binary(min_size=1, max_size=400), st.integers(min_value=8, max_value=300))
def test_a_damaged_png_is_a_logo_or_a_logo_problem(noise: bytes, cut: int) -> None:
    good = image_file("PNG", (30, 30))
    damaged = good[:cut] + noise + good[cut + len(noise) :]
    try:
        checked(damaged)
    except LogoProblem:
        pass
