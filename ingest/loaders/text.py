"""Text and its structure, whatever the format: whitespace normalized with an offset map back to the raw text,
blocks mapped into normalized offsets, plain text's paragraphs and titles, hard-wrapped lines unwrapped."""

from __future__ import annotations

import bisect
import itertools
import re

from spanqa.ingest.loaders.base import HEADING, TEXT, Block, PageSpan, RawBlock

# ----------------------------------------------------------------------------------------------------------
# Whitespace normalization with an offset map
# ----------------------------------------------------------------------------------------------------------

_WHITESPACE_RUN = re.compile(r"\s+")
# Characters str.splitlines() breaks on (besides \r\n, handled as one break).
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def normalize_whitespace(text: str) -> tuple[str, list[int]]:
    """Normalize whitespace, keeping a map from each output char back to the input.

    Rules: ``\\r\\n``, ``\\r`` and other line separators become ``\\n``; tabs, NBSP and other unicode spaces
    become ``' '``; runs of spaces collapse to one; spaces at line starts and ends are dropped; three or more
    newlines collapse to two (a paragraph break); the whole text is stripped. Every non-whitespace char is
    kept unchanged.

    Args:
        text: any text.

    Returns:
        ``(normalized, source_index)`` with ``len(source_index) == len(normalized)``, ``source_index``
        strictly increasing and ``text[source_index[i]] == normalized[i]`` for every non-whitespace char.
    """
    out: list[str] = []
    index: list[int] = []
    pos = 0
    for match in _WHITESPACE_RUN.finditer(text):
        start, end = match.span()
        if start > pos:  # a run of non-whitespace chars, kept verbatim
            out.append(text[pos:start])
            index.extend(range(pos, start))
        pos = end
        if start == 0 or end == len(text):  # leading / trailing whitespace of the whole text
            continue
        if end - start == 1 and text[start] not in _LINE_BREAKS:  # fast path: the common single space
            out.append(" ")
            index.append(start)
            continue
        breaks: list[int] = []
        i = start
        while i < end and len(breaks) < 2:
            ch = text[i]
            if ch in _LINE_BREAKS:
                breaks.append(i)
                if ch == "\r" and i + 1 < end and text[i + 1] == "\n":
                    i += 1
            i += 1
        if breaks:
            out.append("\n" * len(breaks))
            index.extend(breaks)
        else:
            out.append(" ")
            index.append(start)
    if pos < len(text):
        out.append(text[pos:])
        index.extend(range(pos, len(text)))
    return "".join(out), index


def _normalize_pages(raw_pages: list[str]) -> tuple[str, list[PageSpan]]:
    """Join page texts with blank lines, normalize, and map each page's raw span into the normalized text."""
    raw_parts: list[str] = []
    raw_spans: list[tuple[int, int]] = []
    offset = 0
    for i, page_text in enumerate(raw_pages):
        if i:
            raw_parts.append("\n\n")
            offset += 2
        raw_parts.append(page_text)
        raw_spans.append((offset, offset + len(page_text)))
        offset += len(page_text)
    text, source_index = normalize_whitespace("".join(raw_parts))
    pages: list[PageSpan] = []
    for number, (raw_start, raw_end) in enumerate(raw_spans, start=1):
        start, end = _normalized_span(text, source_index, raw_start, raw_end)
        pages.append(PageSpan(number=number, char_start=start, char_end=end))
    return text, pages


def _normalized_span(text: str, source_index: list[int], raw_start: int, raw_end: int) -> tuple[int, int]:
    """Where raw ``[raw_start, raw_end)`` lies in the normalized text, trimmed of whitespace."""
    start = bisect.bisect_left(source_index, raw_start)
    end = bisect.bisect_left(source_index, raw_end)
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _map_blocks(raw_blocks: list[RawBlock], text: str, source_index: list[int]) -> list[Block]:
    """Blocks in normalized offsets (trimmed; empty ones dropped) from blocks in raw offsets."""
    blocks: list[Block] = []
    for raw in raw_blocks:
        start, end = _normalized_span(text, source_index, raw.start, raw.end)
        if end > start and (not blocks or start >= blocks[-1].char_end):
            blocks.append(Block(start, end, raw.kind, raw.heading))
    return blocks


def _joined_blocks(items: list[tuple[str, int]]) -> tuple[str, list[RawBlock]]:
    """Join block texts with blank lines; a positive level makes a heading that titles what follows."""
    parts: list[str] = []
    raw: list[RawBlock] = []
    headings: list[tuple[int, str]] = []
    offset = 0
    for text, level in items:
        if parts:
            parts.append("\n\n")
            offset += 2
        parts.append(text)
        title = " ".join(text.split())
        kind = HEADING if level and title else TEXT
        raw.append(RawBlock(offset, offset + len(text), kind, tuple(t for _, t in headings)))
        offset += len(text)
        if kind == HEADING:
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, title))
    return "".join(parts), raw


_UNDERLINE = re.compile(r"([=\-~^*#+`])\1{2,}")
_TITLE_END = re.compile(r"[.,;:!?)\]]$")


def _plain_text_blocks(text: str) -> list[Block]:
    """Paragraphs of normalized plain text as blocks, with the headings plain text has: a short first line
    (the title), reStructuredText titles (a line underlined with = - ~ ...), ALL-CAPS lines (man pages)."""
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    underline_levels: list[str] = []
    for match in re.finditer(r"[^\n]+(?:\n[^\n]+)*", text):
        start, end = match.span()
        paragraph = match.group(0)
        lines = paragraph.split("\n")
        level = 0
        if len(lines) == 2 and _UNDERLINE.fullmatch(lines[1].strip()) and len(lines[0]) <= 120:
            mark = lines[1].strip()[0]
            if mark not in underline_levels:
                underline_levels.append(mark)
            level = underline_levels.index(mark) + 1
            title = lines[0].strip()
        elif len(lines) == 1 and len(paragraph) <= 80 and not _TITLE_END.search(paragraph):
            letters = [ch for ch in paragraph if ch.isalpha()]
            if not blocks and len(paragraph.split()) <= 12:
                level = 1
            elif len(letters) >= 3 and all(ch.isupper() for ch in letters):
                level = 2
            title = paragraph.strip()
        if level:
            blocks.append(Block(start, end, HEADING, tuple(t for _, t in headings)))
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, title))
        else:
            blocks.append(Block(start, end, TEXT, tuple(t for _, t in headings)))
    return blocks


# A line is wrapped, not ended, when it is at least this share of its paragraph's width.
WRAPPED_LINE_SHARE = 0.75
# Paragraphs whose longest lines are shorter than this are lists or tables, never wrapped prose.
MIN_WRAP_WIDTH = 40
_LIST_ITEM = re.compile(r"(?:[-*+•·]|\d{1,3}[.)]|[a-zA-Z][.)])\s")


def unwrap_lines(text: str, blocks: list[Block]) -> str:
    """Join the hard-wrapped lines of prose blocks (man pages, plain-text manuals, PDF lines) with spaces.

    A line break becomes a space when the line before it runs close to its paragraph's width (the wrap
    column) and the next line does not start a list item; short lines (a definition's term, a list, the
    last line of a paragraph) keep their breaks. Each ``\n`` is replaced by one space, so every offset into
    the text stays what it was.

    Args:
        text: normalized text.
        blocks: its blocks; only text blocks are unwrapped (headings, rows and code keep their lines).

    Returns:
        The text, as long as ``text``.
    """
    chars = list(text)
    for block in blocks:
        if block.kind != TEXT:
            continue
        # Paragraphs; "*", not "+": a one-line paragraph must match, or a long line backtracks quadratically.
        for match in re.finditer(r"[^\n]+(?:\n[^\n]+)*", text[block.char_start : block.char_end]):
            lines = match.group(0).split("\n")
            if len(lines) < 2:
                continue
            lengths = sorted(len(line) for line in lines)
            width = lengths[max(0, (len(lengths) * 9) // 10 - 1)] if len(lengths) > 2 else lengths[-1]
            if width < MIN_WRAP_WIDTH:
                continue
            offset = block.char_start + match.start()
            for line, following in itertools.pairwise(lines):
                offset += len(line)
                if len(line) >= WRAPPED_LINE_SHARE * width and not _LIST_ITEM.match(following):
                    chars[offset] = " "
                offset += 1
    return "".join(chars)
