"""Token-window chunking on sentence boundaries, counted with the retriever's own tokenizer."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spanqa.types import page_at

# A sentence ends after . ! ? (or their unicode cousins), optional closing quotes/brackets, then whitespace;
# a blank line always ends one.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])([\"'”’)\]]*)\s+|\n\s*\n")


@dataclass(frozen=True)
class ChunkSpan:
    """Where a chunk lies in the document text."""

    char_start: int
    char_end: int
    page: int | None = None


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentences of ``text`` as [start, end) spans without surrounding whitespace."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        closers = match.group(1) or ""
        _append_stripped(text, start, match.start() + len(closers), spans)
        start = match.end()
    _append_stripped(text, start, len(text), spans)
    return spans


def _append_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


def _units(
    text: str, tokenizer: Any, max_unit_tokens: int, piece_tokens: int
) -> tuple[list[tuple[int, int]], list[int]]:
    """Sentences with their token counts; one over ``max_unit_tokens`` is cut into ``piece_tokens`` pieces."""
    sentences = sentence_spans(text)
    if not sentences:
        return [], []
    units: list[tuple[int, int]] = []
    counts: list[int] = []
    batch = 512
    for offset in range(0, len(sentences), batch):
        group = sentences[offset : offset + batch]
        encoded = tokenizer(
            [text[s:e] for s, e in group],
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,
        )
        for (s, e), offsets in zip(group, encoded["offset_mapping"], strict=True):
            n = len(offsets)
            if n <= max_unit_tokens:
                units.append((s, e))
                counts.append(max(n, 1))
                continue
            # Pieces meet at token starts, so characters the tokenizer drops (control chars) stay covered.
            cuts = [s] + [s + offsets[t][0] for t in range(piece_tokens, n, piece_tokens)] + [e]
            for index, (p_start, p_end) in enumerate(itertools.pairwise(cuts)):
                before = len(units)
                _append_stripped(text, p_start, p_end, units)
                if len(units) > before:
                    counts.append(len(offsets[index * piece_tokens : (index + 1) * piece_tokens]) or 1)
    return units, counts


def chunk_text(
    text: str,
    tokenizer: Any,
    *,
    chunk_tokens: int = 200,
    overlap_tokens: int = 40,
    page_starts: Sequence[tuple[int, int]] = (),
) -> list[ChunkSpan]:
    """Cut ``text`` into windows of about ``chunk_tokens`` tokens that end on sentence boundaries.

    Consecutive chunks share whole sentences worth up to ``overlap_tokens`` tokens; a sentence longer than a
    chunk is cut on token boundaries into pieces of ``overlap_tokens`` tokens (so overlap still works).

    Args:
        text: the document text.
        tokenizer: a fast HF tokenizer (the retriever's, so chunk sizes match what the encoder sees).
        chunk_tokens: the most tokens per chunk.
        overlap_tokens: tokens shared by consecutive chunks, at most.
        page_starts: (page number, char offset where that page starts), sorted by offset.

    Returns:
        Chunk spans in text order; ``text[c.char_start:c.char_end]`` never starts or ends with whitespace.
    """
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    overlap_tokens = max(0, min(overlap_tokens, chunk_tokens // 2))
    piece_tokens = overlap_tokens if overlap_tokens else chunk_tokens
    units, counts = _units(text, tokenizer, chunk_tokens, piece_tokens)
    spans: list[ChunkSpan] = []
    i, n = 0, len(units)
    while i < n:
        j, total = i, 0
        while j < n and (j == i or total + counts[j] <= chunk_tokens):
            total += counts[j]
            j += 1
        char_start, char_end = units[i][0], units[j - 1][1]
        spans.append(ChunkSpan(char_start, char_end, page_at(list(page_starts), char_start)))
        if j >= n:
            break
        k, back = j, 0
        while k - 1 > i and back + counts[k - 1] <= overlap_tokens:
            back += counts[k - 1]
            k -= 1
        i = k
    return spans
