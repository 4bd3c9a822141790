"""The overview's chart, drawn on the server as SVG.

Chosen over a charting library because the chart is a few bar series over 30 days: a few
dozen lines of SVG need no script (nothing to allow in the CSP, nothing to download), print
and scale as text, and carry their own accessible description. The figures are also given
as a table beside it, for screen readers and for exact values.

Every series of one chart shares its scale (one unit: a currency, or one token), so bars of
equal height are equal amounts; the y axis is labelled in that unit, and a legend names the
series by colour.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

WIDTH = 960
HEIGHT = 260
LEFT = 64
RIGHT = 8
TOP = 10
BOTTOM = 24
TICKS = 4
PALETTE = ("#0b4fa8", "#b35c00", "#0b7a3e", "#7a2bb3", "#a11d1d")


def nice_top(top: Decimal) -> Decimal:
    """The smallest 1, 2 or 5 times a power of ten, times ``TICKS``, at or above ``top``
    (the axis' end, so its ticks fall on round numbers)."""
    if top <= 0:
        return Decimal(TICKS)
    step = top / TICKS
    power = Decimal(1).scaleb(step.adjusted())
    for factor in (1, 2, 5, 10):
        if power * factor >= step:
            return power * factor * TICKS
    raise AssertionError("unreachable: 10 × power ≥ step")


def bar_chart(
    title: str, unit: str, series: list[tuple[str, list[Decimal]]], day_labels: list[str]
) -> dict[str, Any] | None:
    """Bars per day for each series, side by side, on one scale in ``unit``; with a y axis,
    an x axis (first, middle and last day) and a legend: what ``dashboard/chart.html``
    draws (None: nothing to draw)."""
    days = len(day_labels)
    if not series or not days:
        return None
    top = nice_top(max(max(values) for _, values in series))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / days
    bar = max(1.0, slot * 0.8 / len(series))
    lines: list[dict[str, object]] = []
    for tick in range(TICKS + 1):
        y = TOP + plot_h - plot_h * tick / TICKS
        lines.append(
            {
                "css": "axis" if tick == 0 else "grid-line",
                "x1": LEFT,
                "y1": f"{y:.1f}",
                "x2": WIDTH - RIGHT,
                "y2": f"{y:.1f}",
                "label": f"{(top * tick / TICKS).normalize():,f}",
                "label_x": LEFT - 6,
                "label_y": f"{y + 4:.1f}",
            }
        )
    lines.append({"css": "axis", "x1": LEFT, "y1": TOP, "x2": LEFT, "y2": TOP + plot_h})
    lines[-1]["label"] = None
    bars = []
    for index, (_name, values) in enumerate(series):
        for day, value in enumerate(values):
            if value <= 0:
                continue
            height = plot_h * float(value / top)
            bars.append(
                {
                    "x": f"{LEFT + day * slot + slot * 0.1 + index * bar:.1f}",
                    "y": f"{TOP + plot_h - height:.1f}",
                    "width": f"{bar:.1f}",
                    "height": f"{height:.1f}",
                    "colour": PALETTE[index % len(PALETTE)],
                }
            )
    marked = []
    for day in (0, days // 2, days - 1):
        anchor = "start" if day == 0 else ("end" if day == days - 1 else "middle")
        x = LEFT + (day + 1) * slot if day == days - 1 else LEFT + day * slot
        marked.append({"x": f"{x:.1f}", "anchor": anchor, "label": day_labels[day]})
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "title": title,
        "unit": unit,
        "names": [name for name, _ in series],
        "lines": lines,
        "bars": bars,
        "days": marked,
        "day_y": HEIGHT - 6,
        "unit_y": TOP + 4,
    }
