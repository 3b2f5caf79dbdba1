"""What every loader shares: the records it returns (``LoadedText``, its ``Block``s and ``PageSpan``s), the
block kinds, and the one error a user sees (``LoadError``, one line)."""

from __future__ import annotations

from dataclasses import dataclass, field

from spanqa.errors import SpanqaError

MB = 1_000_000
"""Bytes per megabyte in size messages (as in ``max_bytes = int(settings.max_file_mb * MB)``)."""

HEAD_BYTES = 8192
"""How many leading bytes ``load_file`` hands to ``detect_format`` (callers sniffing files: read as many)."""

# Block kinds that name what follows instead of answering anything: they go into heading paths, not chunks.
HEADING, TERM, HEADER_ROW, NAVIGATION = "heading", "term", "header", "nav"
TEXT, ITEM, ROW, CODE = "text", "item", "row", "code"
#: A PDF page's running header or footer: no passage holds it, and none runs across it.
RUNNING = "running"
NON_CONTENT_KINDS = frozenset({HEADING, HEADER_ROW, NAVIGATION, RUNNING})


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
    #: The page's printed label ("xii", "42") where the document says or shows it; None: unknown.
    label: str | None = None


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


@dataclass
class RawBlock:
    """A block before whitespace normalization: ``raw[start:end]``, its kind and the heading path above it
    (a walk may still change both as it reads on)."""

    start: int
    end: int
    kind: str
    heading: tuple[str, ...]
