"""What a PDF page's drawing says beyond its text (pypdf's text visitor): where each piece of text stands, so
that a page set in two columns is read column by column, and the type size of each line, so that a PDF
without bookmarks still gets headings, the lines set in clearly larger type than its body."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Runs whose baselines lie this close (in points) are one line.
LINE_TOLERANCE = 2.0
#: A line is a heading when its type is at least this much larger than the body's.
HEADING_RATIO = 1.15
#: Heading lines are short; a document where more of its lines than this share are in large type has no
#: heading/body contrast to go by.
HEADING_MAX_CHARS, HEADING_MAX_SHARE = 120, 0.25
#: Heading levels told apart by size; smaller headings than the last level's take that level.
MAX_LEVELS = 4


@dataclass(frozen=True)
class Line:
    """One line of a page: its baseline, the size of its type and its text (one space between words)."""

    y: float
    size: float
    text: str


@dataclass(frozen=True)
class Piece:
    """One piece of a page's extracted text as pypdf emitted it, with where it was drawn (None for a piece
    of whitespace pypdf added, or one whose matrices could not be read) and its type size."""

    text: str
    x: float | None
    y: float | None
    size: float


@dataclass
class PageDrawing:
    """A pypdf ``visitor_text`` for one page: every piece of the text ``extract_text`` returns, in order (they
    join to exactly that text), with the matrices it was drawn with. Cheap to collect (a tuple per piece);
    positions are worked out only when asked for."""

    raw: list[tuple[str, tuple[Any, ...], tuple[Any, ...], Any]] = field(default_factory=list)

    def __call__(self, text: str, cm: Any, tm: Any, _font: Any, font_size: Any) -> None:
        self.raw.append((text, tuple(cm), tuple(tm), font_size))

    def pieces(self) -> list[Piece]:
        pieces = []
        for text, cm, tm, font_size in self.raw:
            if not text.strip():
                pieces.append(Piece(text, None, None, 0.0))
                continue
            try:
                x = float(tm[4]) * float(cm[0]) + float(tm[5]) * float(cm[2]) + float(cm[4])
                y = float(tm[4]) * float(cm[1]) + float(tm[5]) * float(cm[3]) + float(cm[5])
                scale = math.hypot(float(tm[2]), float(tm[3])) * math.hypot(float(cm[2]), float(cm[3]))
                size = float(font_size or 0) * (scale or 1.0)
            except (TypeError, ValueError, IndexError):
                pieces.append(Piece(text, None, None, 0.0))  # a malformed matrix: no place, never no text
                continue
            pieces.append(Piece(text, x, y, size))
        return pieces

    def lines(self) -> list[Line]:
        """The page's lines (pieces drawn on one baseline, in drawing order) with their type size."""
        lines: list[Line] = []
        group: list[tuple[float, float, str]] = []
        for piece in self.pieces():
            if piece.y is None:
                continue
            if group and abs(piece.y - group[0][0]) > LINE_TOLERANCE:
                lines.append(_line(group))
                group = []
            group.append((piece.y, piece.size, piece.text))
        if group:
            lines.append(_line(group))
        return [line for line in lines if line.text]


#: Two columns need at least this many lines set side by side (a table of a few rows is not a layout).
MIN_COLUMN_LINES = 8
#: How far (in points) a piece may start from the right column's edge and still be in it.
EDGE_TOLERANCE = 2.0
#: The left column's lines must fill this share of the room between their start and the right column: a
#: column of text fills its width; a table's first column of short terms does not.
COLUMN_FILL = 0.75
#: ...and most of the page's lines are set side by side (not a table or a listing inside one column).
SIDE_BY_SIDE_SHARE = 0.4
#: The average width of a character, as a share of the type size (for how far a piece reaches).
CHAR_WIDTH = 0.5


def column_text(drawing: PageDrawing, width: float) -> str | None:
    """The page's text read column by column when it is set in two columns side by side, else None (keep
    pypdf's order). Pieces above both columns (a running header) come first and pieces below the right
    column (a footer) last; each piece keeps the text pypdf gave it, spaces and line breaks included."""
    pieces = drawing.pieces()
    placed = [p for p in pieces if p.x is not None and p.y is not None]
    if width <= 0 or not placed:
        return None
    middle = width / 2
    # The right column's edge: where the lines pypdf starts near the middle begin (not a right-aligned page
    # number that ends a line of the left column, such as an index's).
    edges: Counter[int] = Counter()
    line_start = True
    for p in pieces:
        starts_line = p.x is not None and line_start and not p.text[:1].isspace()
        if starts_line and p.x is not None and middle - 0.08 * width <= p.x <= middle + 0.15 * width:
            edges[round(p.x)] += 1
        if p.text:
            line_start = p.text.endswith("\n")
    if not edges:
        return None
    edge = float(edges.most_common(1)[0][0])
    right_rows = {
        round(p.y)
        for p in placed
        if p.x is not None and p.y is not None and abs(p.x - edge) <= EDGE_TOLERANCE
    }
    starts: dict[int, float] = {}
    reaches: dict[int, float] = {}
    for p in placed:
        if p.x is not None and p.y is not None and p.x < edge - EDGE_TOLERANCE:
            row = round(p.y)
            starts[row] = min(starts.get(row, p.x), p.x)
            reaches[row] = max(reaches.get(row, 0.0), p.x + len(p.text.rstrip()) * p.size * CHAR_WIDTH)
    side_by_side = sorted(y for y in right_rows if y in starts)
    rows = {round(p.y) for p in placed if p.y is not None}
    if len(side_by_side) < max(MIN_COLUMN_LINES, SIDE_BY_SIDE_SHARE * len(rows)):
        return None
    fills = sorted((reaches[y] - starts[y]) / max(edge - starts[y], 1.0) for y in side_by_side)
    if fills[len(fills) // 2] < COLUMN_FILL:
        return None  # short cells beside a column: a table, read row by row
    top, bottom = side_by_side[-1] + LINE_TOLERANCE, min(right_rows) - LINE_TOLERANCE
    parts: dict[str, list[str]] = {"above": [], "left": [], "right": [], "below": []}
    where = "above"
    for piece in pieces:
        if piece.x is not None and piece.y is not None:
            if piece.y > top:
                where = "above"
            elif piece.y < bottom:
                where = "below"
            else:
                where = "right" if piece.x >= edge - EDGE_TOLERANCE else "left"
        parts[where].append(piece.text)  # whitespace goes with the piece before it
    blocks = ["".join(parts[name]).strip("\n") for name in ("above", "left", "right", "below")]
    return "\n".join(block for block in blocks if block)


def _line(runs: list[tuple[float, float, str]]) -> Line:
    size = max(runs, key=lambda run: len(run[2].strip()))[1]
    return Line(runs[0][0], size, " ".join("".join(run[2] for run in runs).split()))


def heading_lines(pages: list[list[Line]]) -> list[list[tuple[int, str]]]:
    """Per page, its lines set in larger type than the document's body, as (level, text): level 1 for the
    largest size, 2 for the next... (at most ``MAX_LEVELS``). None on a page when the document shows no
    contrast (no body size, or too many large lines)."""
    chars: Counter[float] = Counter()
    for page in pages:
        for line in page:
            chars[round(line.size * 2) / 2] += len(line.text)
    if not chars:
        return [[] for _ in pages]
    body = chars.most_common(1)[0][0]
    if body <= 0:
        return [[] for _ in pages]
    candidates = [
        [
            (round(line.size * 2) / 2, line.text)
            for line in page
            if line.size >= body * HEADING_RATIO
            and len(line.text) <= HEADING_MAX_CHARS
            and re.search(r"[^\W\d_]", line.text)
        ]
        for page in pages
    ]
    total = sum(len(page) for page in pages)
    found = sum(len(page) for page in candidates)
    if not found or found > HEADING_MAX_SHARE * total:
        return [[] for _ in pages]
    sizes = sorted({size for page in candidates for size, _ in page}, reverse=True)
    level = {size: min(rank, MAX_LEVELS) for rank, size in enumerate(sizes, start=1)}
    return [[(level[size], text) for size, text in page] for page in candidates]
