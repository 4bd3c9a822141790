"""The overview's chart, drawn on the server as SVG.

Chosen over a charting library because the chart is one bar series per token over 30 days:
a few dozen lines of SVG need no script (nothing to allow in the CSP, nothing to download),
print and scale as text, and carry their own accessible description. The figures are also
given as a table beside it, for screen readers and for exact values.
"""

from __future__ import annotations

from html import escape

WIDTH = 720
HEIGHT = 160
LEFT = 8
BOTTOM = 22
PALETTE = ("#0b4fa8", "#b35c00", "#0b7a3e", "#7a2bb3", "#a11d1d")


def bar_chart_svg(title: str, series: list[tuple[str, list[float]]], day_labels: list[str]) -> str:
    """Bars per day for each series, side by side; ``series`` values are in display units
    (their own scale each: the tallest bar of a series fills the height)."""
    days = len(day_labels)
    if not series or not days:
        return ""
    slot = (WIDTH - LEFT) / days
    bar = max(1.0, slot * 0.8 / len(series))
    parts = []
    for index, (_name, values) in enumerate(series):
        top = max(values) or 1.0
        colour = PALETTE[index % len(PALETTE)]
        for day, value in enumerate(values):
            if value <= 0:
                continue
            height = (HEIGHT - BOTTOM - 4) * value / top
            x = LEFT + day * slot + index * bar
            y = HEIGHT - BOTTOM - height
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{colour}"></rect>'
            )
    axis_y = HEIGHT - BOTTOM
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{axis_y}" x2="{WIDTH}" y2="{axis_y}"></line>')
    for day in (0, days // 2, days - 1):
        x = LEFT + day * slot
        anchor = "start" if day == 0 else ("end" if day == days - 1 else "middle")
        x_text = x + slot if day == days - 1 else x
        parts.append(
            f'<text x="{x_text:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">'
            f"{escape(day_labels[day])}</text>"
        )
    legend = ", ".join(escape(name) for name, _ in series)
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title" '
        f'xmlns="http://www.w3.org/2000/svg"><title id="chart-title">{escape(title)}: '
        f"{legend}</title>{''.join(parts)}</svg>"
    )
