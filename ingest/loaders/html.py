"""HTML and Markdown: readable text and its blocks (paragraphs, list items, definitions, table rows, code,
headings) with the heading path above each."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from spanqa.ingest.loaders.base import (
    CODE,
    HEADER_ROW,
    HEADING,
    ITEM,
    NAVIGATION,
    ROW,
    TERM,
    TEXT,
    LoadedText,
    RawBlock,
)
from spanqa.ingest.loaders.decode import decode_file_text
from spanqa.ingest.loaders.text import _map_blocks, normalize_whitespace

#: A block whose visible text is at least this share link text is navigation (a table of contents, an index).
NAV_LINK_SHARE = 0.8

_DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "head",
    "title",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
)
_PARAGRAPH_TAGS = frozenset(
    {
        *("p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol", "dl"),
        *("section", "article", "header", "footer", "nav", "aside", "main", "figure", "figcaption"),
        *("address", "hr", "form", "fieldset", "details", "summary", "caption", "body", "html"),
    }
)
_LINE_TAGS = frozenset({"div", "li", "tr", "td", "th", "dt", "dd", "br", "legend", "option"})
_HTML_SPACE = re.compile(r"[ \t\n\r\f]+")


_HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}


@dataclass
class _OpenBlock:
    raw_start: int
    kind: str
    heading: tuple[str, ...]
    level: int = 0
    chars: int = 0
    link_chars: int = 0
    dt: int = 0  # which <dt> of the document it sits in (0: none)


@dataclass
class _HtmlWalk:
    """State of one walk over an HTML tree: the text so far and the blocks found in it (raw offsets)."""

    parts: list[str] = field(default_factory=list)
    length: int = 0
    blocks: list[RawBlock] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)  # (level, title), outermost first
    terms: list[str | None] = field(default_factory=list)  # the current <dt> of each open <dl>
    table_headers: list[str | None] = field(default_factory=list)  # the header row of each open table
    row_cells: list[list[int]] = field(default_factory=list)  # per open <tr>: [th cells, td cells]
    current: _OpenBlock | None = None
    dts: int = 0  # <dt> elements opened so far
    open_dt: int = 0  # the innermost open <dt> (0: none)
    last_term_dt: int = -1  # the <dt> of the last term block

    def append(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def heading_path(self) -> tuple[str, ...]:
        path = [title for _, title in self.headings] + [t for t in self.terms if t]
        header = self.table_headers[-1] if self.table_headers else None
        return (*path, header) if header else tuple(path)

    def close_block(self) -> _Closed | None:
        """End the open block; returns what it was when it held any text."""
        block, self.current = self.current, None
        if block is None:
            return None
        raw = _tail_text(self.parts, self.length - block.raw_start)
        if not raw.strip():
            return None
        kind = block.kind
        mostly_links = block.link_chars >= NAV_LINK_SHARE * max(block.chars, 1)
        if kind not in (HEADING, TERM, HEADER_ROW) and mostly_links:
            kind = NAVIGATION
        self.blocks.append(RawBlock(block.raw_start, self.length, kind, block.heading))
        return _Closed(kind, re.sub(r"\s*¶$", "", " ".join(raw.split())), block.level, block.dt)


@dataclass(frozen=True)
class _Closed:
    """A block just closed: its kind, its text on one line, its heading level, its <dt> (0: none)."""

    kind: str
    text: str
    level: int
    dt: int


def _tail_text(parts: list[str], count: int) -> str:
    """The last ``count`` characters of ``"".join(parts)`` without joining everything."""
    out: list[str] = []
    for part in reversed(parts):
        if count <= 0:
            break
        out.append(part[-count:] if len(part) > count else part)
        count -= len(part)
    return "".join(reversed(out))


def _block_kind(open_tags: list[str]) -> tuple[str, int]:
    """What a block is (and a heading's level), from the tags it sits in: the first of these that applies."""
    levels = [_HEADING_TAGS[name] for name in open_tags if name in _HEADING_TAGS]
    if levels:
        return HEADING, levels[-1]
    for name, kind in (("dt", TERM), ("pre", CODE), ("tr", ROW), ("li", ITEM)):
        if name in open_tags:
            return kind, 0
    return TEXT, 0


@dataclass
class _HtmlText:
    text: str
    blocks: list[RawBlock]


def _html_walk(markup: str) -> _HtmlText:
    """Extract readable text and its blocks from HTML.

    No scripts, styles or comments; block elements become line breaks (paragraph-level ones a blank line).
    Every block (paragraph, list item, definition, table row, code block, heading) is recorded with its raw
    offsets, its kind and the heading path above it: the headings h1-h6 that enclose it, the ``<dt>`` term
    of a ``<dd>``, and a table's header row for its rows.
    """
    from bs4 import BeautifulSoup
    from bs4.element import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag

    soup = BeautifulSoup(markup, "html.parser")
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for tag in soup.find_all(hidden=True):
        tag.decompose()

    walk = _HtmlWalk()
    open_tags: list[str] = []
    pending_break = 0  # newlines owed before the next text: breaks in a row (and blank text between) merge
    pre_depth = 0
    link_depth = 0
    # Iterative walk (deeply nested markup must not hit the recursion limit): (node, closing) events.
    stack: list[tuple[Any, bool]] = [(soup, False)]
    while stack:
        node, closing = stack.pop()
        if isinstance(node, NavigableString):
            if isinstance(node, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            text = str(node) if pre_depth else _HTML_SPACE.sub(" ", str(node))
            if not text.strip() and (pending_break or not walk.parts):
                continue
            if pending_break:
                walk.append("\n" * pending_break)
                pending_break = 0
            if walk.current is None and text.strip():
                # Inside a table row the row is the block, whatever its cells hold.
                kind, level = (ROW, 0) if walk.row_cells else _block_kind(open_tags)
                walk.current = _OpenBlock(walk.length, kind, walk.heading_path(), level, dt=walk.open_dt)
            if walk.current is not None:
                visible = len(text.strip())
                walk.current.chars += visible
                if link_depth:
                    walk.current.link_chars += visible
            walk.append(text)
            continue
        if not isinstance(node, Tag):
            continue
        name = node.name.lower()
        in_row = bool(walk.row_cells) and name not in ("tr", "table")
        breaks = 2 if name in _PARAGRAPH_TAGS else 1 if name in _LINE_TAGS else 0
        if name == "tr":
            breaks = 2  # rows are blocks of their own; cells inside stay one line each
        pending_break = max(pending_break, breaks)
        if breaks and not in_row:
            closed = walk.close_block()
            if closed is not None:
                _after_block(walk, closed)
        if closing:
            open_tags.pop()
            if name == "pre":
                pre_depth -= 1
            elif name == "a":
                link_depth -= 1
            elif name == "dl":
                walk.terms.pop()
            elif name == "dt":
                walk.open_dt = 0
            elif name == "table":
                walk.table_headers.pop()
            elif name == "tr":
                walk.row_cells.pop()
            continue
        open_tags.append(name)
        if name == "pre":
            pre_depth += 1
        elif name == "a":
            link_depth += 1
        elif name == "dl":
            walk.terms.append(None)
        elif name == "table":
            walk.table_headers.append(None)
        elif name == "tr":
            walk.row_cells.append([0, 0])
        elif name in ("th", "td") and walk.row_cells:
            walk.row_cells[-1][0 if name == "th" else 1] += 1
        elif name == "dt" and walk.terms:
            walk.terms[-1] = None  # a new entry: its own term replaces the last one's
        if name == "dt":
            walk.dts += 1
            walk.open_dt = walk.dts
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.contents))
    closed = walk.close_block()
    if closed is not None:
        _after_block(walk, closed)
    return _HtmlText("".join(walk.parts), walk.blocks)


def _after_block(walk: _HtmlWalk, closed: _Closed) -> None:
    """Update the heading path after a heading, a definition term or a table header row."""
    text, last = closed.text, walk.blocks[-1]
    if closed.kind == HEADING:
        while walk.headings and walk.headings[-1][0] >= closed.level:
            walk.headings.pop()
        walk.headings.append((closed.level, text))
    elif closed.kind == TERM and walk.terms:
        # A term opens its entry: it is in the entry's heading path (for the passages of a long definition
        # cut in several) and the first block of its first passage. Terms in a row ("-u", "--untracked")
        # name one entry.
        heading = last.heading
        run = len(walk.blocks) - 1
        if closed.dt and closed.dt == walk.last_term_dt and walk.blocks[run - 1].kind == TERM:
            # A second line of the same <dt> ("-a<br>--data-only", as PostgreSQL's manual writes them) opened
            # under the first line as its term: it is the same entry's name, not a term within that entry.
            heading = heading[:-1]
        walk.last_term_dt = closed.dt
        while run > 0 and walk.blocks[run - 1].kind == TERM and walk.blocks[run - 1].heading[:-1] == heading:
            run -= 1
        if run < len(walk.blocks) - 1:
            text = f"{walk.blocks[run].heading[-1]}, {text}"
        for block in walk.blocks[run:]:
            block.heading = (*heading, text)
        walk.terms[-1] = text
    elif closed.kind == ROW and walk.row_cells and walk.table_headers:
        th, td = walk.row_cells[-1]
        if th and not td and walk.table_headers[-1] is None:
            last.kind = HEADER_ROW
            cells = _tail_text(walk.parts, walk.length - last.start).splitlines()
            walk.table_headers[-1] = " | ".join(cell.strip() for cell in cells if cell.strip())


_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n[A-Za-z_][\w-]*[ \t]*:.*?\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL
)


def _markdown_walk(source: str) -> _HtmlText:
    """Render Markdown (CommonMark + tables + strikethrough) to HTML, then extract its text and blocks."""
    from markdown_it import MarkdownIt

    source = _FRONT_MATTER.sub("", source, count=1)
    renderer = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return _html_walk(renderer.render(source))


def structured(walked: _HtmlText, fmt: str, encoding: str | None = None) -> LoadedText:
    """Walked HTML as a loaded document: text normalized, blocks in its offsets."""
    text, source_index = normalize_whitespace(walked.text)
    return LoadedText(text, fmt, [], encoding, _map_blocks(walked.blocks, text, source_index))


def load_html(data: bytes) -> LoadedText:
    raw, encoding = decode_file_text(data, "html")
    return structured(_html_walk(raw), "html", encoding)


def load_markdown(data: bytes) -> LoadedText:
    raw, encoding = decode_file_text(data, "md")
    return structured(_markdown_walk(raw), "md", encoding)
