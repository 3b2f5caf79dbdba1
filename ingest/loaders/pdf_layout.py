"""What a PDF page's drawing says beyond its text: the type size of each line (pypdf's text visitor), so that
a PDF without bookmarks still gets headings, the lines set in clearly larger type than its body."""

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


@dataclass
class LineCollector:
    """A pypdf ``visitor_text`` that gathers the runs of one page; ``lines()`` groups them by baseline."""

    runs: list[tuple[float, float, str]] = field(default_factory=list)

    def __call__(self, text: str, cm: Any, tm: Any, _font: Any, font_size: Any) -> None:
        if not text.strip():
            return
        try:
            y = float(tm[4]) * float(cm[1]) + float(tm[5]) * float(cm[3]) + float(cm[5])
            scale = math.hypot(float(tm[2]), float(tm[3])) * math.hypot(float(cm[2]), float(cm[3]))
            size = float(font_size or 0) * (scale or 1.0)
        except (TypeError, ValueError, IndexError):
            return  # a malformed matrix costs the run's size, never the page
        self.runs.append((y, size, text))

    def lines(self) -> list[Line]:
        lines: list[Line] = []
        group: list[tuple[float, float, str]] = []
        for run in self.runs:  # drawing order: a line's runs come together
            if group and abs(run[0] - group[0][0]) > LINE_TOLERANCE:
                lines.append(_line(group))
                group = []
            group.append(run)
        if group:
            lines.append(_line(group))
        return [line for line in lines if line.text]


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
