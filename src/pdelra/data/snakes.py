"""A Pathfinder generator after drewlinsley/pathfinder `snakes2.py`, simplified to what the task needs.

An image holds two target contours ("snakes": chains of short paddles whose direction turns a little at each
step), shorter distractor snakes, and two circular markers on target tips. Label 1 iff both markers sit on
the two ends of the same snake; label 0 puts one marker on each snake. Images are drawn at 4× resolution and
box-filtered down to 32×32, which gives the anti-aliased grey strokes of the original.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdelra.data.pathfinder import SIDE

SUPERSAMPLE = 4
MARGIN = 1.5  # px kept free at the border (snakes2: margin 1)
MAX_TRIES = 50  # restarts of one snake
TURN_TRIES = 12  # candidate turns per paddle


@dataclass(frozen=True)
class SnakeParams:
    contour_length: int = 14  # paddles per target snake (14 = LRA's hard "curv_contour_length_14")
    paddle_length: float = 2.0  # px at 32×32
    paddle_gap: float = 0.8  # px between paddles: contours are dashed as in the original
    continuity: float = 0.6  # max turn per paddle, in radians
    thickness: float = 0.6  # stroke width, px
    marker_radius: float = 1.5
    distractors: int = 3  # distractor snakes of contour_length // 3 paddles


Point = tuple[float, float]
Segment = tuple[Point, Point]


def _snake(rng: np.random.Generator, n: int, p: SnakeParams, occupied: np.ndarray) -> list[Segment] | None:
    """Paddle segments (start, end) of one snake that stays inside the image and off `occupied`, or None.

    Like snakes2, each paddle tries several random turns within ±continuity and takes the first that fits,
    so a long snake in a small image bends away from the border and other snakes instead of failing.
    Plain floats, not numpy: these are scalar steps, where numpy's per-call overhead dominates.
    """
    low, high = MARGIN, SIDE - MARGIN
    for _ in range(MAX_TRIES):
        x, y = rng.uniform(low + 2, high - 2, size=2).tolist()
        angle = rng.uniform(0, 2 * math.pi)
        segments: list[Segment] = []
        turns = rng.uniform(-p.continuity, p.continuity, size=(n, TURN_TRIES)).tolist()
        for paddle_turns in turns:
            for turn in paddle_turns:
                dx, dy = math.cos(angle + turn), math.sin(angle + turn)
                ex, ey = x + p.paddle_length * dx, y + p.paddle_length * dy
                if low <= ex <= high and low <= ey <= high and not _hits(occupied, (x, y), (ex, ey)):
                    break
            else:
                break  # no turn fits: start this snake again elsewhere
            angle += turn
            segments.append(((x, y), (ex, ey)))
            x, y = ex + p.paddle_gap * dx, ey + p.paddle_gap * dy
        if len(segments) == n:
            return segments
    return None


def _samples(start: Point, end: Point, count: int) -> list[tuple[int, int]]:
    """Integer pixel (x, y) of `count` evenly spaced points along a segment."""
    return [
        (int(start[0] + t * (end[0] - start[0])), int(start[1] + t * (end[1] - start[1])))
        for t in (i / (count - 1) for i in range(count))
    ]


def _hits(occupied: np.ndarray, start: Point, end: Point) -> bool:
    return any(occupied[min(y, SIDE - 1), min(x, SIDE - 1)] for x, y in _samples(start, end, 4))


def _occupy(occupied: np.ndarray, segments: list[Segment]) -> None:
    """Mark the pixels a snake covers, dilated by one, so later snakes keep clear of it."""
    for start, end in segments:
        for x, y in _samples(start, end, 6):
            occupied[max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2] = True


def draw_sample(rng: np.random.Generator, label: int, p: SnakeParams) -> np.ndarray | None:
    """One 32×32 uint8 image with the given label, or None when the snakes did not fit (caller redraws)."""
    from PIL import Image, ImageDraw

    occupied = np.zeros((SIDE, SIDE), dtype=bool)
    targets = []
    for _ in range(2):
        snake = _snake(rng, p.contour_length, p, occupied)
        if snake is None:
            return None
        _occupy(occupied, snake)
        targets.append(snake)
    distractors = []
    for _ in range(p.distractors):
        snake = _snake(rng, max(p.contour_length // 3, 2), p, occupied)
        if snake is not None:  # a distractor that does not fit is simply left out, as in snakes2
            _occupy(occupied, snake)
            distractors.append(snake)
    s = SUPERSAMPLE
    canvas = Image.new("L", (SIDE * s, SIDE * s), 0)
    draw = ImageDraw.Draw(canvas)
    for snake in targets + distractors:
        for start, end in snake:
            draw.line(
                [(start[0] * s, start[1] * s), (end[0] * s, end[1] * s)],
                fill=255,
                width=max(1, round(p.thickness * s)),
            )
    tips = [targets[0][0][0], targets[0][-1][1]] if label == 1 else [targets[0][0][0], targets[1][-1][1]]
    for tip in tips:
        x, y = tip[0] * s, tip[1] * s
        r = p.marker_radius * s
        draw.ellipse([x - r, y - r, x + r, y + r], fill=255)
    return np.asarray(canvas.resize((SIDE, SIDE), Image.Resampling.BOX))


def generate(out: Path, *, n: int, seed: int, per_folder: int, params: SnakeParams) -> None:
    """Write n balanced samples as out/imgs/<k>/sample_<i>.png with out/metadata/<k>.npy text index files."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    (out / "metadata").mkdir(parents=True, exist_ok=True)
    lines: dict[int, list[str]] = {}
    for i in range(n):
        label = int(rng.integers(0, 2))
        image = None
        while image is None:
            image = draw_sample(rng, label, params)
        folder = i // per_folder
        (out / "imgs" / str(folder)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(image, mode="L").save(out / "imgs" / str(folder) / f"sample_{i}.png")
        # Columns as in the release: path, file, index, label, then the generation settings.
        lines.setdefault(folder, []).append(
            f"imgs/{folder} sample_{i}.png {i} {label} {params.contour_length} {params.paddle_length} "
            f"{params.distractors}"
        )
    for folder, folder_lines in lines.items():
        (out / "metadata" / f"{folder}.npy").write_text("\n".join(folder_lines) + "\n")
