"""Text primitives shared by the layers (no project imports): where sentences lie in a text."""

from __future__ import annotations

import re

# A sentence ends after . ! ? (or their unicode cousins), optional closing quotes/brackets, then whitespace;
# a blank line always ends one.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])([\"'”’)\]]*)\s+|\n\s*\n")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentences of ``text`` as [start, end) spans without surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        closers = match.group(1) or ""
        append_stripped(text, start, match.start() + len(closers), spans)
        start = match.end()
    append_stripped(text, start, len(text), spans)
    return spans


def append_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Append [start, end) of ``text`` to ``out`` without surrounding whitespace, unless nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))
