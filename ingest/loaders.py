"""Format loaders: read a file, pick its loader by content as well as extension, extract and normalize text.

Every user-level problem (missing, unreadable, binary, corrupt, encrypted, too large, empty) is a
``LoadError`` whose message is one short line fit to show a user and store in the catalog; no traceback
ever escapes. Heavy parsers (pypdf, python-docx, BeautifulSoup, markdown-it, charset-normalizer) are
imported only when used.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import io
import itertools
import logging
import re
import stat as stat_module
import threading
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.manpage import MAN_NAME, ManLinkError, ManPageError, gunzip, looks_like_man
from ingest.manpage import to_html as man_to_html
from ingest.packaged import MAX_UNPACKED, PackagedError, epub_html, odt_blocks, zip_format
from spanqa.errors import SpanqaError, first_line
from spanqa.types import page_at

logger = logging.getLogger(__name__)

MB = 1_000_000
"""Bytes per megabyte in size messages (as in ``max_bytes = int(settings.max_file_mb * MB)``)."""

HEAD_BYTES = 8192
GZIP_MAGIC = b"\x1f\x8b"
DOCX_MAX_UNPACKED = MAX_UNPACKED
"""A .docx unpacking to more than this is refused before it is parsed (a zip bomb stays small on disk)."""
"""How many leading bytes ``load_file`` hands to ``detect_format`` (callers sniffing files: read as many)."""

TEXT_EXTENSIONS = frozenset({".txt", ".text", ".rst"})
MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown"})
HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
#: Never read as text, whatever their first bytes look like (archives, images, media, office files spanqa
#: does not read, compiled code).
_BINARY_EXTENSION_LIST = """
.zip .gz .tgz .bz2 .xz .7z .tar .jar .png .jpg .jpeg .gif .bmp .ico .webp .svgz .mp3 .mp4 .wav .ogg .avi .mov
.mkv .doc .xls .xlsx .ppt .pptx .ods .odp .pyc .o .so .a .dll .exe .bin .class .db .sqlite .sqlite3
.woff .woff2 .ttf .otf
"""
BINARY_EXTENSIONS = frozenset(_BINARY_EXTENSION_LIST.split())
#: Zipped formats: each has its loader and passes the unpacked-size guard first.
ZIP_FORMATS = ("docx", "epub", "odt")
SUPPORTED_EXTENSIONS: frozenset[str] = (
    TEXT_EXTENSIONS | MARKDOWN_EXTENSIONS | HTML_EXTENSIONS | frozenset({".pdf", ".docx", ".epub", ".odt"})
)

#: Each format's loader version (1 when not listed): a change to what a loader extracts or how it cuts
#: blocks bumps it, and the next ingest cuts that format's files again (``chunking_signature``).
LOADER_VERSIONS: dict[str, int] = {"pdf": 2}

_EXTENSION_FORMATS: dict[str, str] = {
    **dict.fromkeys(TEXT_EXTENSIONS, "txt"),
    **dict.fromkeys(MARKDOWN_EXTENSIONS, "md"),
    **dict.fromkeys(HTML_EXTENSIONS, "html"),
    ".pdf": "pdf",
    ".docx": "docx",
    ".epub": "epub",
    ".odt": "odt",
}

# Block kinds that name what follows instead of answering anything: they go into heading paths, not chunks.
HEADING, TERM, HEADER_ROW, NAVIGATION = "heading", "term", "header", "nav"
TEXT, ITEM, ROW, CODE = "text", "item", "row", "code"
#: A PDF page's running header or footer: no passage holds it, and none runs across it.
RUNNING = "running"
NON_CONTENT_KINDS = frozenset({HEADING, HEADER_ROW, NAVIGATION, RUNNING})
# A block whose visible text is at least this share link text is navigation (a table of contents, an index).
NAV_LINK_SHARE = 0.8


class LoadError(SpanqaError):
    """A file that cannot be loaded; ``str(exc)`` is a one-line, user-facing reason (no traceback text)."""


class NotADocument(LoadError):
    """A file with nothing of its own to index (empty, or a man page that only points at another): skipped."""


@dataclass(frozen=True)
class PageSpan:
    """Where one page lies in ``LoadedText.text``: ``text[char_start:char_end]`` (1-based ``number``)."""

    number: int
    char_start: int
    char_end: int


@dataclass(frozen=True)
class Block:
    """One structural block of a document: ``text[char_start:char_end]``, trimmed.

    Attributes:
        char_start: where it starts in ``LoadedText.text``.
        char_end: where it ends.
        kind: "text", "item" (list item), "row" (table row), "code", "term" (a definition's ``<dt>``), or
            one that names what follows and answers nothing: "heading", "header" (a table's header row),
            "nav" (mostly links: a table of contents, an index), "running" (a PDF page's header or footer).
        heading: the titles above it, outermost first (headings, the term of the definition it belongs to,
            a term itself included, and the header row of its table).
    """

    char_start: int
    char_end: int
    kind: str = TEXT
    heading: tuple[str, ...] = ()


@dataclass
class LoadedText:
    """The normalized text of one file.

    Attributes:
        text: normalized text (see ``normalize_whitespace``).
        format: one of "txt", "md", "html", "pdf", "docx".
        pages: for PDFs one span per page, in order, trimmed to the page's text (an empty page has an empty
            span); ``[]`` for formats without pages.
        encoding: the detected charset for text formats (txt, md, html), else None.
        blocks: the document's structure, in text order, never overlapping.
    """

    text: str
    format: str
    pages: list[PageSpan]
    encoding: str | None = None
    blocks: list[Block] = field(default_factory=list)


def page_for_offset(pages: list[PageSpan], offset: int) -> int | None:
    """The number of the page holding ``offset`` (the last page starting at or before it for gaps).

    Args:
        pages: spans from ``LoadedText.pages``.
        offset: a char offset into ``LoadedText.text``.

    Returns:
        A 1-based page number, or None when there are no pages.
    """
    return page_at([(p.number, p.char_start) for p in pages], offset)


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


# ----------------------------------------------------------------------------------------------------------
# Format detection
# ----------------------------------------------------------------------------------------------------------

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_HTML_START = re.compile(
    r"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL
)
# Control chars that real text files do not contain (tab, newlines, form feed, backspace and ESC are allowed).
_BINARY_CONTROLS = re.compile("[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f]")
_NON_ASCII = re.compile("[^\x00-\x7f]")


def _bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def _utf16_without_bom(head: bytes) -> str | None:
    """Guess UTF-16 LE/BE text without a BOM from where its NUL bytes fall (ASCII-heavy text only)."""
    sample = head[: len(head) - len(head) % 2]
    if len(sample) < 4:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    if odd_nuls >= 0.3 * half and even_nuls <= 0.02 * half:
        return "utf-16-le"
    if even_nuls >= 0.3 * half and odd_nuls <= 0.02 * half:
        return "utf-16-be"
    return None


def _looks_like_text(text: str) -> bool:
    """False when decoded text is full of control chars (i.e. binary data that happened to decode)."""
    if not text:
        return True
    if "\x00" in text:
        return False
    limit = 0.02 * len(text)
    return all(count <= limit for count, _ in enumerate(_BINARY_CONTROLS.finditer(text), start=1))


def _sniff_head(head: bytes) -> str | None:
    """Decode the head of a file to sniff it, or None when it looks binary."""
    encoding = _bom_encoding(head) or (_utf16_without_bom(head) if b"\x00" in head else None)
    if encoding is None:
        if b"\x00" in head:
            return None
        encoding = "utf-8"
    # An incremental decoder tolerates a multi-byte char cut at the end of the head.
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    try:
        text = decoder.decode(head, final=False)
    except UnicodeDecodeError:
        if encoding != "utf-8":
            return None
        text = head.decode("cp1252", errors="replace")  # legacy 8-bit text; good enough to sniff
    return text if _looks_like_text(text) else None


def looks_like_text(path: Path) -> bool:
    """Whether a file of no supported extension holds text that spanqa can read (by its first bytes): text,
    or a gzipped man page (``ls.1.gz``)."""
    if MAN_NAME.search(path.name) and path.suffix.lower() == ".gz":
        try:
            with path.open("rb") as fh:
                return fh.read(2) == GZIP_MAGIC
        except OSError:
            return False
    if path.suffix.lower() in BINARY_EXTENSIONS or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return False
    return bool(head.strip()) and _sniff_head(head) is not None


def _zip_format(path: Path) -> str | None:
    """ "docx", "epub" or "odt" for a readable zip of that kind, "" for another zip; None when unreadable."""
    try:
        with zipfile.ZipFile(path) as archive:
            return zip_format(archive) or ""
    except (OSError, zipfile.BadZipFile, ValueError, RuntimeError, KeyError):
        return None


def detect_format(path: Path, head: bytes) -> str | None:
    """Choose the loader by content as well as extension.

    ``%PDF-`` magic -> "pdf"; a zip holding word/document.xml -> "docx"; an HTML document start
    (``<!doctype html`` or ``<html``, after an optional XML declaration and comments) -> "html"; otherwise
    the extension decides. A file named .pdf/.docx whose content is neither goes to that loader, which then
    reports it as corrupt.

    Args:
        path: the file (its extension, and for zips its member list, are consulted).
        head: the first bytes of the file (``HEAD_BYTES`` of them is plenty).

    Returns:
        "txt", "md", "html", "pdf", "docx", "epub", "odt" or "man" (troff man/mdoc source, or a gzipped man
        page by its name); "txt" for any other text; None when the content is binary
        (NUL bytes, undecodable, another zip type).
    """
    ext_format = _EXTENSION_FORMATS.get(path.suffix.lower())
    if head.startswith(GZIP_MAGIC) and MAN_NAME.search(path.name):
        return "man"
    if head.lstrip(b" \t\r\n\x0c").startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        kind = _zip_format(path)
        if kind:
            return kind
        # An unreadable zip named for its format goes to that loader, which reports it as corrupt.
        return ext_format if kind is None and ext_format in ZIP_FORMATS else None
    text = _sniff_head(head)
    if text is not None and _HTML_START.match(text[:1024].lstrip("\ufeff")):
        return "html"
    if ext_format in ("pdf", *ZIP_FORMATS):
        return ext_format
    if text is None:
        return None
    if ext_format in (None, "txt") and looks_like_man(path.name, text[:2048]):
        return "man"
    # Text of a type without a loader of its own (an extensionless README, .csv, .json, source code) is
    # read as plain text.
    return ext_format or "txt"


# ----------------------------------------------------------------------------------------------------------
# Text decoding
# ----------------------------------------------------------------------------------------------------------

_HTML_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# What browsers do (WHATWG Encoding): these labels mean windows-1252.
_WINDOWS_1252_ALIASES = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "ascii", "us-ascii"})


def _declared_html_charset(data: bytes) -> str | None:
    head = data[:4096]
    match = _XML_ENCODING.match(head) or _HTML_CHARSET.search(head)
    if not match:
        return None
    label = match.group(1).decode("ascii", errors="ignore").lower()
    if label in _WINDOWS_1252_ALIASES:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A UTF-16/32 declaration read from ASCII-compatible bytes is wrong by definition; browsers use UTF-8.
    return "utf-8" if name.startswith(("utf-16", "utf-32")) else name


def _mostly_latin(text: str) -> bool:
    """True when at most 40% of the letters are non-ASCII: Western text, not e.g. Cyrillic read as cp1252."""
    letters = [ch for ch in text[:100_000] if ch.isalpha()]
    if not letters:
        return True
    return sum(1 for ch in letters if ord(ch) > 127) <= 0.4 * len(letters)


def _decode_text(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """Decode the bytes of a text file.

    Order: BOM; the declared charset (HTML); strict UTF-8; UTF-16 without BOM; UTF-8 with a few bad bytes
    replaced; cp1252 for Western 8-bit text; charset-normalizer detection.

    Args:
        data: the file's bytes.
        declared: a charset the document declares, tried right after a BOM.

    Returns:
        (text, encoding name).
    """
    bom = _bom_encoding(data)
    candidates = [bom] if bom else []
    if declared:
        candidates.append(declared)
    candidates.append("utf-8")
    if b"\x00" in data[:HEAD_BYTES]:
        utf16 = _utf16_without_bom(data[:HEAD_BYTES])
        if utf16:
            candidates.append(utf16)
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        if not _looks_like_text(text):
            raise LoadError("binary file")
        return text, codecs.lookup(encoding).name
    if b"\x00" in data:
        raise LoadError("binary file")
    # Mostly UTF-8 with a few bad bytes (a damaged or concatenated file): keep UTF-8, replace the bad bytes.
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if sum(1 for _ in _NON_ASCII.finditer(text)) - bad >= 10 * bad and _looks_like_text(text):
        logger.debug("%d invalid UTF-8 sequences replaced", bad)
        return text, "utf-8"
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        text = ""
    if text and _mostly_latin(text) and _looks_like_text(text):
        return text, "cp1252"
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise LoadError("undecodable text (unknown encoding)")
    text = str(best)
    if not _looks_like_text(text):
        raise LoadError("binary file")
    return text, codecs.lookup(best.encoding).name


def decode_file_text(data: bytes, fmt: str) -> tuple[str, str]:
    """The text of a txt, md or html file's bytes, and its encoding (an HTML file's declared charset first).

    Raises:
        LoadError: binary or undecodable data.
    """
    return _decode_text(data, _declared_html_charset(data) if fmt == "html" else None)


# ----------------------------------------------------------------------------------------------------------
# HTML and Markdown
# ----------------------------------------------------------------------------------------------------------

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
    blocks: list[tuple[int, int, str, tuple[str, ...]]] = field(default_factory=list)
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

    def close_block(self) -> tuple[str, str, int, int] | None:
        """End the open block; returns its (kind, text, heading level, <dt> number) when it held any text."""
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
        self.blocks.append((block.raw_start, self.length, kind, block.heading))
        return kind, re.sub(r"\s*¶$", "", " ".join(raw.split())), block.level, block.dt


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
    blocks: list[tuple[int, int, str, tuple[str, ...]]]


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


def _after_block(walk: _HtmlWalk, closed: tuple[str, str, int, int]) -> None:
    """Update the heading path after a heading, a definition term or a table header row."""
    kind, text, level, dt = closed
    start, end, _, heading = walk.blocks[-1]
    if kind == HEADING:
        while walk.headings and walk.headings[-1][0] >= level:
            walk.headings.pop()
        walk.headings.append((level, text))
    elif kind == TERM and walk.terms:
        # A term opens its entry: it is in the entry's heading path (for the passages of a long definition
        # cut in several) and the first block of its first passage. Terms in a row ("-u", "--untracked")
        # name one entry.
        run = len(walk.blocks) - 1
        if dt and dt == walk.last_term_dt and walk.blocks[run - 1][2] == TERM:
            # A second line of the same <dt> ("-a<br>--data-only", as PostgreSQL's manual writes them) opened
            # under the first line as its term: it is the same entry's name, not a term within that entry.
            heading = heading[:-1]
        walk.last_term_dt = dt
        while run > 0 and walk.blocks[run - 1][2] == TERM and walk.blocks[run - 1][3][:-1] == heading:
            run -= 1
        if run < len(walk.blocks) - 1:
            text = f"{walk.blocks[run][3][-1]}, {text}"
        for index in range(run, len(walk.blocks)):
            walk.blocks[index] = (*walk.blocks[index][:3], (*heading, text))
        walk.terms[-1] = text
    elif kind == ROW and walk.row_cells and walk.table_headers:
        th, td = walk.row_cells[-1]
        if th and not td and walk.table_headers[-1] is None:
            walk.blocks[-1] = (start, end, HEADER_ROW, heading)
            cells = _tail_text(walk.parts, walk.length - start).splitlines()
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


# ----------------------------------------------------------------------------------------------------------
# PDF and DOCX
# ----------------------------------------------------------------------------------------------------------

_pypdf_quiet_lock = threading.Lock()
_pypdf_quiet_depth = 0
_pypdf_saved_level = logging.NOTSET


@contextlib.contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """Silence pypdf's logging and warnings (broken files make it very chatty) for the duration."""
    global _pypdf_quiet_depth, _pypdf_saved_level
    pypdf_logger = logging.getLogger("pypdf")
    with _pypdf_quiet_lock:
        if _pypdf_quiet_depth == 0:
            _pypdf_saved_level = pypdf_logger.level
            pypdf_logger.setLevel(logging.CRITICAL + 1)
        _pypdf_quiet_depth += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        with _pypdf_quiet_lock:
            _pypdf_quiet_depth -= 1
            if _pypdf_quiet_depth == 0:
                pypdf_logger.setLevel(_pypdf_saved_level)


def _pdf_pages(data: bytes) -> tuple[list[str], list[tuple[int, int, str]]]:
    """The text of each page of a PDF, and its outline as (page index, level, title) in page order."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, WrongPasswordError

    with _quiet_pypdf():
        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                try:
                    decrypted = reader.decrypt("")
                except DependencyError as exc:
                    raise LoadError(f"encrypted PDF (cannot decrypt: {first_line(exc)})") from exc
                except (FileNotDecryptedError, WrongPasswordError) as exc:
                    raise LoadError("encrypted PDF") from exc
                if not decrypted:  # PasswordType.NOT_DECRYPTED == 0
                    raise LoadError("encrypted PDF")
            pages = list(reader.pages)
        except LoadError:
            raise
        except (FileNotDecryptedError, WrongPasswordError) as exc:
            raise LoadError("encrypted PDF") from exc
        except Exception as exc:  # pypdf raises many types (and KeyError, ValueError...) on broken files
            raise LoadError(f"corrupt PDF: {first_line(exc)}") from exc
        if not pages:
            raise LoadError("corrupt PDF: no pages")
        texts: list[str] = []
        failed = 0
        for number, page in enumerate(pages, start=1):
            try:
                texts.append(page.extract_text() or "")
            except Exception as exc:
                failed += 1
                logger.warning("PDF page %d: text extraction failed: %s", number, first_line(exc))
                texts.append("")
        if failed == len(pages):
            raise LoadError("corrupt PDF: text extraction failed on every page")
        outline = _pdf_outline(reader)
    return texts, outline


def _pdf_outline(reader: Any) -> list[tuple[int, int, str]]:
    """The bookmarks of a PDF as (page index, level, title), sorted by page; [] when it has none or they
    cannot be read (a broken outline costs the headings, never the file)."""
    entries: list[tuple[int, int, str]] = []
    try:
        stack: list[tuple[Any, int]] = [(reader.outline, 1)]
        while stack and len(entries) < 10_000:
            items, level = stack.pop()
            for item in reversed(items):
                if isinstance(item, list):
                    stack.append((item, level + 1))
                    continue
                page = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
                if page is not None and page >= 0 and title:
                    entries.append((page, level, title))
    except Exception as exc:
        logger.debug("PDF outline unreadable: %s", first_line(exc))
        return []
    return sorted(entries, key=lambda entry: entry[0])


def _docx_blocks(data: bytes) -> list[tuple[str, int]]:
    """Paragraph and table-cell texts of a .docx in document order (headers, footers, text boxes left out),
    each with its heading level (see ``_docx_heading_level``; 0 for body text)."""
    from docx import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    if data.startswith(b"\xd0\xcf\x11\xe0"):  # OLE2: a legacy .doc, or a password-protected Office file
        raise LoadError("not a .docx file (password-protected, or an old .doc)")
    _refuse_zip_bomb(data)
    try:
        document = Document(io.BytesIO(data))
    except ValueError as exc:
        if "not a Word file" in str(exc):  # e.g. a .docm or .dotx: python-docx reads only .docx
            raise LoadError("unsupported Word file (not a .docx document)") from exc
        raise LoadError(f"corrupt DOCX: {first_line(exc)}") from exc
    except Exception as exc:  # BadZipFile, KeyError, PackageNotFoundError, XML syntax errors...
        raise LoadError(f"corrupt DOCX: {first_line(exc)}") from exc

    blocks: list[tuple[str, int]] = []
    # Iterative walk over body content; nested tables are read cell by cell.
    stack: list[Any] = list(reversed(list(document.iter_inner_content())))
    while stack:
        item = stack.pop()
        if isinstance(item, Paragraph):
            blocks.append((item.text, _docx_heading_level(item)))
        elif isinstance(item, Table):
            seen: set[int] = set()
            cells: list[Any] = []
            for row in item.rows:
                for cell in row.cells:
                    if id(cell._tc) not in seen:  # merged cells repeat the same element
                        seen.add(id(cell._tc))
                        cells.append(cell)
            stack.extend(reversed([inner for cell in cells for inner in cell.iter_inner_content()]))
    return blocks


def _refuse_zip_bomb(data: bytes) -> None:
    """Refuse a .docx that would unpack to more than ``DOCX_MAX_UNPACKED`` bytes (python-docx unpacks and
    parses its XML whole): a few kilobytes must not become gigabytes in memory."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, RuntimeError) as exc:
        raise LoadError(f"corrupt DOCX: {first_line(exc)}") from exc
    if unpacked > DOCX_MAX_UNPACKED:
        raise LoadError(f"DOCX unpacks to {unpacked / MB:.0f} MB (more than {DOCX_MAX_UNPACKED / MB:.0f} MB)")


def _docx_heading_level(paragraph: Any) -> int:
    """1 for "Title", N + 1 for "Heading N", 0 for any other paragraph style (only the order matters)."""
    try:
        name = (paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, ValueError, AttributeError):
        return 0
    if name == "Title":
        return 1
    match = re.fullmatch(r"Heading (\d)", name)
    return int(match.group(1)) + 1 if match else 0


# ----------------------------------------------------------------------------------------------------------
# Structure: blocks with heading paths, in normalized offsets
# ----------------------------------------------------------------------------------------------------------

RawBlock = tuple[int, int, str, tuple[str, ...]]
"""(raw start, raw end, kind, heading path): a block before whitespace normalization."""


def _map_blocks(raw_blocks: list[RawBlock], text: str, source_index: list[int]) -> list[Block]:
    """Blocks in normalized offsets (trimmed; empty ones dropped) from blocks in raw offsets."""
    blocks: list[Block] = []
    for raw_start, raw_end, kind, heading in raw_blocks:
        start, end = _normalized_span(text, source_index, raw_start, raw_end)
        if end > start and (not blocks or start >= blocks[-1].char_end):
            blocks.append(Block(start, end, kind, heading))
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
        raw.append((offset, offset + len(text), kind, tuple(t for _, t in headings)))
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


#: A running header or footer is a short line.
RUNNING_LINE_CHARS = 100
#: A line recurring at the top or bottom of at least this many pages (digits aside) runs through the document.
RUNNING_LINE_PAGES = 3
_NUMBER = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"^\s*(\d{1,4})\b|\b(\d{1,4})\s*$")
_TRAILING_NUMBER = re.compile(r"(?!)()|\b(\d{1,4})\s*$")
_ROMAN = re.compile(r"^[ivxlc]{1,7}$", re.IGNORECASE)


def running_lines(text: str, pages: list[PageSpan]) -> list[tuple[int, int]]:
    """The running headers and footers of a PDF's pages, as (start, end) spans of ``text``.

    A page's first or last line is running when it is short and either carries the page's printed number (a
    number at its start or end that follows the page order, as most pages' do: "Chapter 3: Basic Shell
    Features 42", "17", "xii") or recurs, digits aside, at the same end of at least ``RUNNING_LINE_PAGES``
    pages (a manual's title in every footer).
    """
    ends: list[tuple[int, str, int, int]] = []  # (page index, "top"/"bottom", start, end)
    for index, page in enumerate(pages):
        body = text[page.char_start : page.char_end]
        if "\n" not in body:
            continue  # a page of one line is its content, whatever it looks like
        first_end = body.index("\n")
        last_start = body.rindex("\n") + 1
        ends.append((index, "top", page.char_start, page.char_start + first_end))
        ends.append((index, "bottom", page.char_start + last_start, page.char_end))
    short = [e for e in ends if 0 < e[3] - e[2] <= RUNNING_LINE_CHARS]
    # The printed page number follows the page order at a fixed distance on most numbered pages.
    shifts: dict[int, int] = {}
    numbers: dict[tuple[int, str], int] = {}
    for index, where, start, end in short:
        line = text[start:end]
        # A footnote opens with its number: at the bottom, only a number at the end is a page's.
        match = (_PAGE_NUMBER if where == "top" else _TRAILING_NUMBER).search(line)
        if match:
            number = int(match.group(1) or match.group(2))
            numbers[(index, where)] = number
            shifts[index - number] = shifts.get(index - number, 0) + 1
    shift, count = max(shifts.items(), key=lambda kv: kv[1], default=(0, 0))
    numbered = count >= max(RUNNING_LINE_PAGES, len(pages) // 4)
    recurring: dict[tuple[str, str], int] = {}
    for _, where, start, end in short:
        key = (where, _NUMBER.sub("#", text[start:end].strip().lower()))
        recurring[key] = recurring.get(key, 0) + 1
    spans = []
    for index, where, start, end in short:
        line = text[start:end].strip()
        by_number = numbered and numbers.get((index, where)) == index - shift
        by_roman = numbered and index < shift and bool(_ROMAN.match(line.split()[-1] if line else ""))
        key = (where, _NUMBER.sub("#", line.lower()))
        if by_number or by_roman or recurring[key] >= RUNNING_LINE_PAGES:
            spans.append((start, end))
    return sorted(spans)


def _page_blocks(
    text: str,
    pages: list[PageSpan],
    outline: list[tuple[int, int, str]],
    running: Sequence[tuple[int, int]] = (),
) -> list[Block]:
    """One block per non-empty page, titled by the PDF bookmarks at or before it; its ``running`` lines
    (headers and footers) are blocks of their own that no passage holds."""
    cut = sorted(running)
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    entry = 0
    for index, page in enumerate(pages):
        while entry < len(outline) and outline[entry][0] <= index:
            _, level, title = outline[entry]
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, title))
            entry += 1
        if page.char_end <= page.char_start:
            continue
        heading = tuple(t for _, t in headings)
        start = page.char_start
        for line_start, line_end in cut[bisect.bisect_left(cut, (page.char_start, 0)) :]:
            if line_start >= page.char_end:
                break
            body_end = len(text[start:line_start].rstrip()) + start
            if body_end > start:
                blocks.append(Block(start, body_end, TEXT, heading))
            blocks.append(Block(line_start, line_end, RUNNING, heading))
            start = line_end
            while start < page.char_end and text[start].isspace():
                start += 1
        if page.char_end > start:
            blocks.append(Block(start, page.char_end, TEXT, heading))
    return blocks


# ----------------------------------------------------------------------------------------------------------
# load_file
# ----------------------------------------------------------------------------------------------------------


def _read_bytes(path: Path, max_bytes: int | None) -> bytes:
    """Read a file, checking existence, type, permissions and size (before reading) first."""
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise LoadError("file not found") from exc
    except PermissionError as exc:
        raise LoadError("permission denied") from exc
    except OSError as exc:
        raise LoadError(f"cannot read file: {exc.strerror or first_line(exc)}") from exc
    if stat_module.S_ISDIR(stat.st_mode):
        raise LoadError("is a directory")
    if not stat_module.S_ISREG(stat.st_mode):  # a FIFO or device would block or never end
        raise LoadError("not a regular file")
    if max_bytes is not None and stat.st_size > max_bytes:
        raise LoadError(_too_large(stat.st_size, max_bytes))
    try:
        with path.open("rb") as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except PermissionError as exc:
        raise LoadError("permission denied") from exc
    except OSError as exc:
        raise LoadError(f"cannot read file: {exc.strerror or first_line(exc)}") from exc
    if max_bytes is not None and len(data) > max_bytes:  # grew since stat, or a special file
        raise LoadError(_too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"too large ({size / MB:.1f} MB > {max_bytes / MB:g} MB limit; raise SPANQA_MAX_FILE_MB)"


def load_file(path: Path, *, max_bytes: int | None = None) -> LoadedText:
    """Read a file, detect its format, extract its text and normalize it.

    Args:
        path: the file to load.
        max_bytes: refuse files larger than this (checked before reading); None for no limit.

    Returns:
        The normalized text, its format, PDF page spans and the detected text encoding.

    Raises:
        NotADocument: nothing to index (an empty or blank file, a man page that only points at another).
        LoadError: for every user-level problem (not found, permission denied, binary, unsupported,
            corrupt or encrypted PDF, corrupt DOCX, too large, undecodable, no text found).
    """
    path = Path(path)
    data = _read_bytes(path, max_bytes)
    if not data.strip():
        raise NotADocument("empty file")
    head = data[:HEAD_BYTES]
    fmt = detect_format(path, head)
    if fmt is None:
        suffix = path.suffix.lower()
        if suffix in SUPPORTED_EXTENSIONS or _sniff_head(head) is None:
            raise LoadError("binary file")
        raise LoadError(f"unsupported file type ({suffix or 'no extension'})")

    encoding: str | None = None
    pages: list[PageSpan] = []
    blocks: list[Block] = []
    try:
        if fmt == "pdf":
            page_texts, outline = _pdf_pages(data)
            text, pages = _normalize_pages(page_texts)
            blocks = _page_blocks(text, pages, outline, running_lines(text, pages))
            text = unwrap_lines(text, blocks)
        elif fmt == "man":
            source, encoding = _decode_text(gunzip(data) if data.startswith(GZIP_MAGIC) else data)
            walked = _html_walk(man_to_html(source))
            text, source_index = normalize_whitespace(walked.text)
            blocks = _map_blocks(walked.blocks, text, source_index)
        elif fmt == "epub":
            walked = _html_walk(epub_html(data))
            text, source_index = normalize_whitespace(walked.text)
            blocks = _map_blocks(walked.blocks, text, source_index)
        elif fmt in ("docx", "odt"):
            items = _docx_blocks(data) if fmt == "docx" else odt_blocks(data)
            raw, raw_blocks = _joined_blocks(items)
            text, source_index = normalize_whitespace(raw)
            blocks = _map_blocks(raw_blocks, text, source_index)
        else:
            raw, encoding = decode_file_text(data, fmt)
            if fmt in ("html", "md"):
                walked = _html_walk(raw) if fmt == "html" else _markdown_walk(raw)
                text, source_index = normalize_whitespace(walked.text)
                blocks = _map_blocks(walked.blocks, text, source_index)
            else:
                text, _ = normalize_whitespace(raw)
                blocks = _plain_text_blocks(text)
                text = unwrap_lines(text, blocks)
    except LoadError:
        raise
    except PackagedError as exc:
        raise LoadError(str(exc)) from exc
    except ManLinkError as exc:
        raise NotADocument(str(exc)) from exc
    except ManPageError as exc:
        raise LoadError(f"cannot read the man page: {exc}") from exc
    except RecursionError as exc:
        raise LoadError(f"cannot parse {fmt}: too deeply nested") from exc
    except Exception as exc:  # a parser bug or an odd file: never let a traceback reach the user
        logger.debug("unexpected error loading %s", path, exc_info=True)
        raise LoadError(f"cannot parse {fmt}: {first_line(exc)}") from exc

    if not text:
        if fmt == "pdf":
            raise LoadError("no text found (image-only PDF? OCR is not supported)")
        raise LoadError("no text found")
    return LoadedText(text=text, format=fmt, pages=pages, encoding=encoding, blocks=blocks)
