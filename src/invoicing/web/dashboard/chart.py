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
from html import escape

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


def bar_chart_svg(
    title: str, unit: str, series: list[tuple[str, list[Decimal]]], day_labels: list[str]
) -> str:
    """Bars per day for each series, side by side, on one scale in ``unit``; with a y axis,
    an x axis (first, middle and last day) and a legend (:func:`legend_html`)."""
    days = len(day_labels)
    if not series or not days:
        return ""
    top = nice_top(max(max(values) for _, values in series))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / days
    bar = max(1.0, slot * 0.8 / len(series))
    parts = []
    for tick in range(TICKS + 1):
        value = top * tick / TICKS
        y = TOP + plot_h - plot_h * tick / TICKS
        css = "axis" if tick == 0 else "grid-line"
        parts.append(
            f'<line class="{css}" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}">'
            "</line>"
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(f'{value.normalize():,f}')}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"></line>'
    )
    for index, (_name, values) in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        for day, value in enumerate(values):
            if value <= 0:
                continue
            height = plot_h * float(value / top)
            x = LEFT + day * slot + slot * 0.1 + index * bar
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{TOP + plot_h - height:.1f}" width="{bar:.1f}" '
                f'height="{height:.1f}" fill="{colour}"></rect>'
            )
    for day in (0, days // 2, days - 1):
        anchor = "start" if day == 0 else ("end" if day == days - 1 else "middle")
        x = LEFT + (day + 1) * slot if day == days - 1 else LEFT + day * slot
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">'
            f"{escape(day_labels[day])}</text>"
        )
    parts.append(
        f'<text x="4" y="{TOP + 4}" text-anchor="start" class="unit">{escape(unit)}</text>'
    )
    names = ", ".join(escape(name) for name, _ in series)
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title" '
        f'xmlns="http://www.w3.org/2000/svg"><title id="chart-title">{escape(title)} '
        f"({escape(unit)}): {names}</title>{''.join(parts)}</svg>"
    )


def legend_html(names: list[str]) -> str:
    """The chart's legend: each series' colour and name, in the chart's order."""
    items = "".join(
        f'<li><svg class="key" viewBox="0 0 12 12" aria-hidden="true" focusable="false">'
        f'<rect width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"></rect></svg>'
        f"{escape(name)}</li>"
        for i, name in enumerate(names)
    )
    return f'<ul class="legend" id="chart-legend">{items}</ul>'
