"""Figures as pictures: pure functions from numbers to SVG text, no script, no external asset, so
the same drawing sits inline in the HTML page and in a `.svg` file beside the Markdown. Every
mark carries its number as `data-value` (the JSON record's own float, repr'd), so a reader or a
test can check the picture against the record; every label is escaped text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from pytest_frank.base import redact
from pytest_frank.base.figures import number

WIDTH = 600
LABEL_W = 200  # the left column: endpoint names
ROW_H = 22
TOP = 26  # the title's line
OK_BAND = "#dff0d8"  # where a bound allows the value
BAR, OVER = "#4a7bb7", "#a94442"
HALO = 'stroke="#fff" stroke-width="3" paint-order="stroke"'  # a number stays legible on a tick
COLOURS = ("#4a7bb7", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6", "#777777")


@dataclass(frozen=True)
class Point:
    """One bar: `label`'s `value`, and the bounds fleet.yaml set on it (either may be None)."""

    label: str
    value: float
    low: float | None = None
    high: float | None = None

    def inside(self) -> bool:
        return ((self.low is None or self.value >= self.low)
                and (self.high is None or self.value <= self.high))


def bars(name: str, title: str, unit: str, points: list[Point], top: float | None = None) -> str:
    """A horizontal bar per point, its allowed band shaded and its bounds ticked; a bar outside
    its band is red. `top` fixes the scale's end (1 for a share), else the largest number."""
    end = top or _nice(max([p.value for p in points]
                           + [b for p in points for b in (p.low, p.high) if b is not None] + [0]))
    plot = WIDTH - LABEL_W - 70
    x = _scale(end, plot)
    height = TOP + ROW_H * len(points) + 18
    parts = [_open(name, title, unit, height)]
    for i, p in enumerate(points):
        y = TOP + i * ROW_H
        if p.low is not None or p.high is not None:
            lo, hi = x(p.low or 0), x(end if p.high is None else p.high)
            parts.append(f'<rect class="band" x="{lo:.1f}" y="{y}" width="{max(hi - lo, 0):.1f}" '
                         f'height="{ROW_H - 4}" fill="{OK_BAND}"/>')
        parts += [_bound(x(b), y) for b in (p.low, p.high) if b is not None]
        colour = BAR if p.inside() else OVER
        parts.append(f'<rect class="bar" data-label="{_attr(p.label)}" data-value="{p.value!r}"'
                     f'{_bounds(p)} x="{LABEL_W}" y="{y + 4}" width="{x(p.value) - LABEL_W:.1f}" '
                     f'height="{ROW_H - 12}" fill="{colour}"><title>{_text(p.label)}: '
                     f"{_num(p.value, unit)}</title></rect>")
        parts.append(_label(p.label, y + ROW_H / 2 + 2))
        parts.append(f'<text x="{x(p.value) + 4:.1f}" y="{y + ROW_H / 2 + 2}" font-size="11" '
                     f'{HALO}>{_num(p.value, unit)}</text>')
    parts.append(_axis(x, end, unit, TOP + ROW_H * len(points)))
    return "".join(parts) + "</svg>"


def trend(name: str, title: str, unit: str, runs: list[str],
          series: dict[str, list[float | None]], top: float | None = None) -> str:
    """One line per label across `runs` (oldest first); None where a run has no value. `top`
    fixes the scale's end (1 for a share), else the largest number."""
    values = [v for line in series.values() for v in line if v is not None]
    end = top or _nice(max(values + [0]))
    plot_h = 90
    height = TOP + plot_h + 22 + 16 * len(series)
    left, right = 50, WIDTH - 20
    step = (right - left) / max(len(runs) - 1, 1)

    def y(v: float) -> float:
        return TOP + plot_h - (v / end * plot_h if end else 0)

    parts = [_open(name, title, unit, height),
             f'<line x1="{left}" y1="{TOP + plot_h}" x2="{right}" y2="{TOP + plot_h}" '
             f'stroke="#999"/>',
             f'<text x="{left - 4}" y="{TOP + 8}" font-size="10" text-anchor="end">'
             f"{_num(end, '')}</text>",
             f'<text x="{left - 4}" y="{TOP + plot_h}" font-size="10" text-anchor="end">0</text>']
    for k, (label, line) in enumerate(series.items()):
        colour = COLOURS[k % len(COLOURS)]
        xy = [(left + i * step, y(v), v, runs[i]) for i, v in enumerate(line) if v is not None]
        if len(xy) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b, _, _ in xy)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}"/>')
        parts += [f'<circle class="point" data-label="{_attr(label)}" data-run="{_attr(run)}" '
                  f'data-value="{v!r}" cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour}">'
                  f"<title>{_text(label)} {_text(run)}: {_num(v, unit)}</title></circle>"
                  for a, b, v, run in xy]
        ly = TOP + plot_h + 30 + 16 * k
        parts.append(f'<rect x="{left}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{left + 14}" y="{ly}" font-size="11">{_text(label)}</text>')
    parts.append(f'<text x="{left}" y="{TOP + plot_h + 14}" font-size="10">{_text(runs[0])}</text>'
                 f'<text x="{right}" y="{TOP + plot_h + 14}" font-size="10" text-anchor="end">'
                 f"{_text(runs[-1])} ({len(runs)} runs, UTC)</text>")
    return "".join(parts) + "</svg>"


def _open(name: str, title: str, unit: str, height: int) -> str:
    said = f"{title} ({unit})" if unit else title
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="frank-chart" '
            f'data-figure="{_attr(name)}" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" font-family="sans-serif">'
            f"<title>{_text(said)}</title>"
            f'<text x="4" y="16" font-size="13" font-weight="bold">{_text(said)}</text>')


def _scale(end: float, plot: float):
    return lambda v: LABEL_W + (min(max(v, 0), end) / end * plot if end else 0)


def _bound(x: float, y: float) -> str:
    return (f'<line class="bound" x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + ROW_H - 4}" '
            f'stroke="#3c763d" stroke-width="2"/>')


def _bounds(p: Point) -> str:
    return "".join(f' data-{k}="{v!r}"' for k, v in (("low", p.low), ("high", p.high))
                   if v is not None)


def _label(text: str, y: float) -> str:
    short = text if len(text) <= 32 else text[:31] + "\u2026"
    return (f'<text x="{LABEL_W - 6}" y="{y}" font-size="11" text-anchor="end">'
            f"{_text(short)}</text>")


def _axis(x, end: float, unit: str, y: int) -> str:
    return (f'<line x1="{LABEL_W}" y1="{y}" x2="{x(end):.1f}" y2="{y}" stroke="#999"/>'
            f'<text x="{LABEL_W}" y="{y + 13}" font-size="10">0</text>'
            f'<text x="{x(end):.1f}" y="{y + 13}" font-size="10" text-anchor="end">'
            f"{_num(end, unit)}</text>")


def _nice(v: float) -> float:
    """A round scale end a little past `v`: 1, 2 or 5 times a power of ten."""
    if v <= 0:
        return 1.0
    target = v * 1.05
    power = 10.0 ** math.floor(math.log10(target))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= target)


def _num(v: float, unit: str) -> str:
    return _text(f"{number(v, 4)} {unit}".strip())


def _text(s: str) -> str:
    return escape(redact.inert(str(s)), quote=False)


def _attr(s: str) -> str:
    return escape(redact.inert(str(s)))
