"""The accent colour of a brand: parsed strictly, and the text colour that reads on it.

A colour is ``#`` and six hex digits (``#1a6b3c``; any letter case, stored lower case).
Text on the accent is black or white, whichever contrasts more (WCAG 2 relative luminance).
For every sRGB colour the better of the two reaches at least 4.58:1, above the 4.5:1 that
WCAG AA asks of normal text, so no colour has to be refused for contrast; the check is kept
(``text_color_on`` raises if it ever fails) so a change of rule cannot slip through.
"""

from __future__ import annotations

import re

_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
AA_NORMAL_TEXT = 4.5
BLACK = "#000000"
WHITE = "#ffffff"


class ColorProblem(ValueError):
    """Why a text is not a usable accent colour."""


def parse_color(text: str) -> str:
    """``#rrggbb`` in lower case; ColorProblem for anything else."""
    if not isinstance(text, str) or not _HEX_COLOR.fullmatch(text):
        raise ColorProblem("must be # and six hex digits, like #1a6b3c")
    return text.lower()


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(color: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str, b: str) -> float:
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def text_color_on(accent: str) -> str:
    """Black or white, whichever reads better on ``accent`` (at least AA for normal text)."""
    best = max((BLACK, WHITE), key=lambda text: contrast(text, accent))
    if contrast(best, accent) < AA_NORMAL_TEXT:
        raise ColorProblem("no text colour keeps WCAG AA contrast on it")
    return best
