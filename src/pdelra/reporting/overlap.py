"""Automated checks that a figure reads cleanly: no two texts on top of each other, no legend over data.

- `text_overlaps(fig)`: pairs of drawn texts (titles, axis and tick labels, legend entries, annotations,
  suptitle, ...) whose boxes overlap by more than `tolerance` pixels, each described so a reader finds it:
  ("xlabel of axes 2 'Block'", "xlabel of axes 3 'Block'"). Rotated texts are compared as the rotated
  rectangles they are, not as their (much larger) axis-aligned boxes.
- `legend_hides_data(fig)`: one line per legend whose box covers data points, lines or bars, e.g.
  "legend of axes 1 covers 3 points of 'after_embedding' in axes 1". Only artists in data coordinates
  count: reference lines such as `axhline` and shaded bands (`fill_between`) may lie under a legend.
- `figure_problems(fig)`: both, from one drawing, as lines to print ("texts overlap: A ~ B", legend lines).

Both draw the figure once, at its own dpi, with a renderer that records which texts were really drawn (tick
labels beyond the axis limits exist but are not drawn), so the answer holds for the saved PNG and PDF too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.path import Path
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TOLERANCE_PX = 2.0  # boxes that touch or overlap by a pixel or two look fine
_SHOWN_CHARS = 40


class _RecordingRenderer(RendererAgg):
    """Agg that remembers every Text artist it draws (Text.draw hands itself over as `mtext`)."""

    def __init__(self, width: float, height: float, dpi: float) -> None:
        super().__init__(width, height, dpi)
        self.texts: dict[int, Text] = {}

    def _remember(self, mtext: Any) -> None:
        if isinstance(mtext, Text):
            self.texts.setdefault(id(mtext), mtext)

    def draw_text(
        self,
        gc: Any,
        x: float,
        y: float,
        s: str,
        prop: Any,
        angle: float,
        ismath: Any = False,
        mtext: Any = None,
    ) -> None:
        self._remember(mtext)
        super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)

    def draw_tex(
        self, gc: Any, x: float, y: float, s: str, prop: Any, angle: float, *, mtext: Any = None
    ) -> None:
        self._remember(mtext)
        super().draw_tex(gc, x, y, s, prop, angle, mtext=mtext)


def _draw(fig: Figure) -> _RecordingRenderer:
    renderer = _RecordingRenderer(fig.bbox.width, fig.bbox.height, fig.dpi)
    fig.draw(renderer)
    return renderer


# ----------------------------------------------------------------------------------------------------
# Names a reader recognises
# ----------------------------------------------------------------------------------------------------
def _roles(fig: Figure) -> dict[int, str]:
    """id(text) → its role, such as "xlabel of axes 2" (axes numbered from 1 in fig.axes order)."""
    roles: dict[int, str] = {}
    for k, ax in enumerate(fig.axes, start=1):
        where = f"of axes {k}"
        roles[id(ax.title)] = f"title {where}"
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            roles[id(axis.label)] = f"{name}label {where}"
            roles[id(axis.get_offset_text())] = f"{name} offset text {where}"
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                roles[id(tick.label1)] = roles[id(tick.label2)] = f"{name} tick label {where}"
        for text in ax.texts:
            roles[id(text)] = f"{'annotation' if isinstance(text, Annotation) else 'text'} {where}"
        legend = ax.get_legend()
        if legend is not None:
            roles |= _legend_roles(legend, f"legend {where}")
    for legend in fig.legends:
        roles |= _legend_roles(legend, "figure legend")
    labels = {
        "suptitle": fig.get_suptitle(),
        "supxlabel": fig.get_supxlabel(),
        "supylabel": fig.get_supylabel(),
    }
    for text in fig.texts:
        role = next((r for r, s in labels.items() if s and text.get_text() == s), "figure text")
        roles[id(text)] = role
    return roles


def _legend_roles(legend: Legend, where: str) -> dict[int, str]:
    roles = {id(t): f"entry of {where}" for t in legend.get_texts()}
    roles[id(legend.get_title())] = f"title of {where}"
    return roles


def _describe(text: Text, roles: dict[int, str]) -> str:
    shown = " ".join(text.get_text().split())
    if len(shown) > _SHOWN_CHARS:
        shown = shown[: _SHOWN_CHARS - 1].rstrip() + "…"
    role = roles.get(id(text))
    if role is None:
        k = next((i for i, ax in enumerate(text.figure.axes, 1) if ax is text.axes), None)
        role = f"text of axes {k}" if k else "text"
    return f"{role} '{shown}'"


# ----------------------------------------------------------------------------------------------------
# Overlapping texts
# ----------------------------------------------------------------------------------------------------
def _corners(text: Text, renderer: RendererAgg) -> np.ndarray:
    """The text's rectangle in pixels as 4 corners, rotated as drawn (its box's centre is the centre)."""
    box = text.get_window_extent(renderer)
    if math.isclose(text.get_rotation() % 90, 0, abs_tol=1e-6):
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    rotation = text.get_rotation()
    try:  # the unrotated size, measured the way matplotlib measures it
        text.set_rotation(0)
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(rotation)
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [flat.width / 2, flat.height / 2]
    c, s = math.cos(math.radians(rotation)), math.sin(math.radians(rotation))
    return half @ np.array([[c, s], [-s, c]]) + [box.x0 + box.width / 2, box.y0 + box.height / 2]


def _penetration(a: np.ndarray, b: np.ndarray) -> float:
    """How deep two convex quadrilaterals overlap (separating-axis theorem): ≤ 0 when they are apart."""
    depth = math.inf
    for poly in (a, b):
        for i in range(len(poly)):
            edge = poly[(i + 1) % len(poly)] - poly[i]
            norm = math.hypot(*edge)
            if norm == 0:
                continue
            axis = np.array([-edge[1], edge[0]]) / norm
            pa, pb = a @ axis, b @ axis
            depth = min(depth, min(pa.max(), pb.max()) - max(pa.min(), pb.min()))
    return depth


def text_overlaps(fig: Figure, tolerance: float = TOLERANCE_PX) -> list[tuple[str, str]]:
    """Every pair of visible, non-empty texts drawn in `fig` that overlap by more than `tolerance` pixels."""
    return _text_overlaps(fig, _draw(fig), tolerance)


def _text_overlaps(fig: Figure, renderer: _RecordingRenderer, tolerance: float) -> list[tuple[str, str]]:
    roles = _roles(fig)
    texts = [t for t in renderer.texts.values() if t.get_visible() and t.get_text().strip()]
    shapes = [_corners(t, renderer) for t in texts]
    boxes = [Bbox.from_extents(*s.min(axis=0), *s.max(axis=0)) for s in shapes]
    found = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if not boxes[i].overlaps(boxes[j]):  # cheap test first
                continue
            if _penetration(shapes[i], shapes[j]) > tolerance:
                found.append((_describe(texts[i], roles), _describe(texts[j], roles)))
    return found


# ----------------------------------------------------------------------------------------------------
# Legends over data
# ----------------------------------------------------------------------------------------------------
def _label(artist: Any, kind: str) -> str:
    label = str(artist.get_label())
    return f"{kind} '{label}'" if label and not label.startswith("_") else f"unlabelled {kind}"


def _count(n: int, noun: str) -> str:
    return f"{int(n)} {noun}{'s' if n > 1 else ''}"


def _runs(xy: np.ndarray) -> list[np.ndarray]:
    """The drawn pieces of a polyline: NaN vertices break it, as when matplotlib draws it."""
    ok = np.isfinite(xy).all(axis=1)
    pieces, start = [], None
    for i, good in enumerate([*ok, False]):
        if good and start is None:
            start = i
        elif not good and start is not None:
            pieces.append(xy[start:i])
            start = None
    return pieces


def _line_hits(xy: np.ndarray, region: Bbox) -> bool:
    return any(len(p) > 1 and Path(p).intersects_bbox(region, filled=False) for p in _runs(xy))


def _covered(ax: Axes, region: Bbox) -> list[str]:
    """What of `ax`'s data (in data coordinates) lies in `region` (pixels)."""
    found = []
    for line in ax.lines:
        if not line.get_visible() or line.get_transform() != ax.transData:
            continue
        xy = line.get_transform().transform(line.get_xydata())
        has_marker = line.get_marker() not in (None, "None", "none", "", " ")
        points = region.count_contains(xy[np.isfinite(xy).all(axis=1)]) if has_marker else 0
        if points:
            found.append(f"{_count(points, 'point')} of {_label(line, 'line')}")
        elif line.get_linestyle() not in ("None", "none", "", " ") and _line_hits(xy, region):
            found.append(_label(line, "line"))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection) and coll.get_offset_transform() == ax.transData:
            offsets = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float))
            points = region.count_contains(offsets[np.isfinite(offsets).all(axis=1)])
            if points:
                found.append(f"{_count(points, 'point')} of {_label(coll, 'scatter')}")
        elif isinstance(coll, LineCollection) and coll.get_transform() == ax.transData:
            segments = [
                coll.get_transform().transform(np.asarray(s, dtype=float)) for s in coll.get_segments()
            ]
            if any(_line_hits(s, region) for s in segments):
                found.append(_label(coll, "lines"))
    bars = [
        p
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_visible() and p.get_transform() == ax.transData
    ]
    hit = [b for b in bars if (box := Bbox.intersection(b.get_window_extent(), region)) and box.width > 0]
    if hit:
        found.append(_count(len(hit), "bar"))
    return found


def legend_hides_data(fig: Figure, tolerance: float = TOLERANCE_PX) -> list[str]:
    """One line per legend (of an axes or the figure) whose box lies over data of any axes in `fig`."""
    return _legend_hides_data(fig, _draw(fig), tolerance)


def _legend_hides_data(fig: Figure, renderer: _RecordingRenderer, tolerance: float) -> list[str]:
    legends = [(f"axes {k}", ax.get_legend()) for k, ax in enumerate(fig.axes, 1)]
    legends += [("the figure", legend) for legend in fig.legends]
    found = []
    for owner, legend in legends:
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).padded(-tolerance)
        for k, ax in enumerate(fig.axes, 1):
            region = Bbox.intersection(box, ax.bbox)
            if region is None or region.width <= 0 or region.height <= 0:
                continue
            covered = _covered(ax, region)
            if covered:
                found.append(f"legend of {owner} covers {', '.join(covered)} in axes {k}")
    return found


def figure_problems(fig: Figure, tolerance: float = TOLERANCE_PX) -> list[str]:
    """Both checks from one drawing, as lines to show: "texts overlap: A ~ B", then the legend lines."""
    renderer = _draw(fig)
    overlaps = [f"texts overlap: {a} ~ {b}" for a, b in _text_overlaps(fig, renderer, tolerance)]
    return overlaps + _legend_hides_data(fig, renderer, tolerance)
