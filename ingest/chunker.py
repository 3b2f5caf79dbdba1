"""Chunking that follows the document's structure: sections and blocks first, then sentences, in token windows
counted with the retriever's own tokenizer."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spanqa.ingest.loaders import (
    LOADER_VERSIONS,
    NAVIGATION,
    NON_CONTENT_KINDS,
    ROW,
    RUNNING,
    TERM,
    TEXT,
    Block,
)
from spanqa.settings import Settings
from spanqa.text import append_stripped, sentence_spans
from spanqa.types import page_at

HEADING_SEPARATOR = " > "
"""Joins the titles of a heading path into the one line a chunk records (``Memory > work_mem (integer)``)."""

#: Raise when the chunker, or the loaders of every format, cut the same file differently: every file is cut
#: again at its next ingest (documents remember how they were cut, see ``chunking_signature``). A change to
#: one format's loader bumps its version in ``ingest.loaders.LOADER_VERSIONS`` instead: only that format's
#: files are cut again, with no data migration.
CHUNKER_VERSION = 1


def chunking_signature(chunk_tokens: int, overlap_tokens: int, fmt: str | None = None) -> str:
    """How a document's chunks are cut: the chunker's version, the sizes and, once its loader has changed,
    the format's loader version (a change to any re-cuts the file at its next ingest)."""
    signature = f"v{CHUNKER_VERSION}:{chunk_tokens}/{overlap_tokens}"
    version = LOADER_VERSIONS.get(fmt, 1) if fmt else 1
    return f"{signature}:{fmt}{version}" if version > 1 else signature


@dataclass(frozen=True)
class ChunkSpan:
    """Where a chunk lies in the document text, the heading path above it and the blocks it holds.

    ``segments`` are the chunk's blocks as absolute [start, end) offsets: an answer lies inside one of them.
    ``title`` is, for a later piece of a definition cut in several, where its term lies in the text (the
    term is then left out of ``heading``): the entry's name goes with every piece, answerable in place.
    """

    char_start: int
    char_end: int
    page: int | None = None
    heading: str = ""
    segments: tuple[tuple[int, int], ...] = ()
    title: tuple[int, int] | None = None


@dataclass(frozen=True)
class _Unit:
    """A sentence (or a piece of a long one) of a content block: ``text[start:end]``, its token count and the
    index of its block."""

    start: int
    end: int
    tokens: int
    block: int


def _units(
    text: str,
    tokenizer: Any,
    max_unit_tokens: int,
    piece_tokens: int,
    ranges: Sequence[tuple[int, int]] | None = None,
) -> list[_Unit]:
    """Sentences with their token counts and the index of the range each lies in (the whole text when no
    ranges are given); a sentence over ``max_unit_tokens`` is cut into ``piece_tokens`` pieces."""
    sentences: list[tuple[int, int]] = []
    sentence_owner: list[int] = []
    for index, (start, end) in enumerate([(0, len(text))] if ranges is None else ranges):
        found = sentence_spans(text[start:end])
        sentences.extend((start + s, start + e) for s, e in found)
        sentence_owner.extend([index] * len(found))
    units: list[_Unit] = []
    batch = 512
    for offset in range(0, len(sentences), batch):
        group = sentences[offset : offset + batch]
        encoded = tokenizer(
            [text[s:e] for s, e in group],
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,
        )
        for position, ((s, e), offsets) in enumerate(zip(group, encoded["offset_mapping"], strict=True)):
            n = len(offsets)
            owner = sentence_owner[offset + position]
            if n <= max_unit_tokens:
                units.append(_Unit(s, e, max(n, 1), owner))
                continue
            # Pieces meet at token starts, so characters the tokenizer drops (control chars) stay covered.
            cuts = [s] + [s + offsets[t][0] for t in range(piece_tokens, n, piece_tokens)] + [e]
            for index, (p_start, p_end) in enumerate(itertools.pairwise(cuts)):
                piece: list[tuple[int, int]] = []
                append_stripped(text, p_start, p_end, piece)
                if piece:
                    tokens = len(offsets[index * piece_tokens : (index + 1) * piece_tokens]) or 1
                    units.append(_Unit(piece[0][0], piece[0][1], tokens, owner))
    return units


def chunk_blocks(
    text: str,
    blocks: Sequence[Block],
    tokenizer: Any,
    *,
    chunk_tokens: int = Settings.chunk_tokens,
    overlap_tokens: int = Settings.chunk_overlap,
    page_starts: Sequence[tuple[int, int]] = (),
) -> list[ChunkSpan]:
    """Cut a structured document into chunks that follow its sections and blocks.

    A section is a run of content blocks under the same heading path; a chunk never straddles two sections.
    Within a section whole blocks are packed into windows of up to ``chunk_tokens`` tokens; a window that
    must end inside a block ends at the last block boundary instead when that keeps at least half the window,
    else on a sentence boundary, with ``overlap_tokens`` of sentences shared with the next window. Headings,
    table header rows and navigation blocks are not chunked: they reach the retriever and the reader as each
    chunk's heading path. A PDF page's running header or footer is in no chunk, and no chunk runs across
    it. A definition's term opens its entry's first chunk (an option's name answers "which option ...?")
    and titles the others.

    Args:
        text: the document text.
        blocks: its blocks (``LoadedText.blocks``), in text order.
        tokenizer: a fast HF tokenizer (the retriever's).
        chunk_tokens: the most tokens per chunk.
        overlap_tokens: tokens shared by consecutive chunks of one section cut inside a block, at most.
        page_starts: (page number, char offset where that page starts), sorted by offset.

    Returns:
        Chunk spans in text order, each with its heading path and its blocks.
    """
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    overlap_tokens = max(0, min(overlap_tokens, chunk_tokens // 2))
    piece_tokens = overlap_tokens if overlap_tokens else chunk_tokens
    content = [b for b in blocks if b.kind not in NON_CONTENT_KINDS]
    # Which stretch between running headers and footers each content block is in: a chunk never spans one.
    stretch, stretches = 0, {}
    for b in blocks:
        if b.kind == RUNNING:
            stretch += 1
        else:
            stretches[b.char_start] = stretch
    if not content and not any(b.kind in (NAVIGATION, RUNNING) for b in blocks):
        # Nothing but titles (a one-line note, a Markdown file of headings): its titles are its text. A
        # page of headings and links (a table of contents, an index) stays out.
        content = [Block(b.char_start, b.char_end, TEXT, ()) for b in blocks]
    # Sentences of every content block, tokenized in one pass; each unit knows its block.
    units = _units(text, tokenizer, chunk_tokens, piece_tokens, [(b.char_start, b.char_end) for b in content])
    # Per content block, the span of its entry's term(s) when it belongs to a definition entry.
    titles: list[tuple[int, int] | None] = []
    entries: dict[tuple[str, ...], tuple[int, int]] = {}
    previous: Block | None = None
    for block in content:
        if block.kind == TERM:
            run = entries.get(block.heading)
            extends = previous is not None and previous.kind == TERM and previous.heading == block.heading
            entries[block.heading] = (run[0] if extends and run else block.char_start, block.char_end)
        titles.append(entries.get(block.heading))
        previous = block
    spans: list[ChunkSpan] = []
    pages = list(page_starts)

    def section_of(unit: int) -> tuple[Any, ...]:
        # A table row is a passage of its own (with its column headers in the heading path).
        block = content[units[unit].block]
        where = (block.heading, stretches.get(block.char_start, 0))
        return (*where, units[unit].block) if block.kind == ROW else where

    i, n = 0, len(units)
    while i < n:
        section = section_of(i)
        j, total = i, 0
        while j < n and section_of(j) == section and (j == i or total + units[j].tokens <= chunk_tokens):
            total += units[j].tokens
            j += 1
        ends_block = j >= n or units[j].block != units[j - 1].block
        if not ends_block:
            # Back off to the last block boundary if that keeps at least half of the window.
            kept = total
            for k in range(j - 1, i, -1):
                kept -= units[k].tokens
                if units[k].block != units[k - 1].block:
                    if kept * 2 >= chunk_tokens:
                        j, ends_block = k, True
                    break
        char_start, char_end = units[i].start, units[j - 1].end
        segments = tuple(
            (max(b.char_start, char_start), min(b.char_end, char_end))
            for b in content[units[i].block : units[j - 1].block + 1]
        )
        first = content[units[i].block]
        heading, title = first.heading, None
        if first.kind == TERM and units[i].start == first.char_start:
            heading = heading[:-1]  # the entry's term opens the chunk: no need to say it twice
        elif (entry := titles[units[i].block]) is not None and entry[1] <= char_start:
            heading, title = heading[:-1], entry  # a later piece of an entry: its term as title
        spans.append(
            ChunkSpan(
                char_start,
                char_end,
                page_at(pages, char_start),
                HEADING_SEPARATOR.join(heading),
                segments,
                title,
            )
        )
        if j >= n:
            break
        if ends_block:
            i = j
            continue
        k, back = j, 0
        while (
            k - 1 > i
            and units[k - 1].block == units[j].block
            and back + units[k - 1].tokens <= overlap_tokens
        ):
            back += units[k - 1].tokens
            k -= 1
        i = k
    return spans
