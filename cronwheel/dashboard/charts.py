"""Small bar charts drawn on the server as inline SVG: no script library, nothing to
load, and a text alternative that gives a screen reader the numbers."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

WIDTH = 120
"""The chart's width in SVG units: two per bar for 60 bars (a minute each of an hour)."""
HEIGHT = 30
BASELINE = 1
"""The thin line under the bars, so an empty chart still reads as a chart."""


def bar_chart(values: Sequence[int], label: str, *, css_class: str = "") -> Markup:
    """``values`` (oldest first) as bars scaled to the largest; ``label`` is the text a
    screen reader gets (the ``aria-label`` and the ``<title>`` a mouse hover shows)."""
    step = WIDTH / max(1, len(values))
    peak = max(values, default=0)
    room = HEIGHT - BASELINE
    bars = []
    for i, value in enumerate(values):
        if value <= 0:
            continue
        height = max(1.0, room * value / peak)  # a single attempt stays visible
        bars.append(
            Markup('<rect x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}"/>').format(
                i * step, room - height, step * 0.8, height
            )
        )
    classes = f"chart {css_class}".strip()
    return Markup(
        '<svg class="{}" role="img" aria-label="{}" viewBox="0 0 {} {}"'
        ' preserveAspectRatio="none" focusable="false"><title>{}</title>'
        '<rect class="chart-base" x="0" y="{}" width="{}" height="{}"/>{}</svg>'
    ).format(
        classes,
        label,
        WIDTH,
        HEIGHT,
        label,
        room,
        WIDTH,
        BASELINE,
        Markup("").join(bars),
    )


def describe(pool: str, what: str, values: Sequence[int], minutes: int) -> str:
    """The chart's text: ``pool default: 42 attempts finished in the last 60 minutes,
    at most 5 in a minute``."""
    total = sum(values)
    peak = max(values, default=0)
    return f"Pool {pool}: {total} {what} in the last {minutes} minutes, at most {peak} in a minute"
