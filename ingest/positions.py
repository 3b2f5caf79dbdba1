"""Where an answer lies in the file itself: line and column, for editors (``spanqa ask --vimgrep``).

Offsets in spanqa point into a document's indexed text (normalized whitespace, markup removed). An editor
needs the line and column in the file on disk. Plain text maps exactly through the normalization's offset
map; Markdown and HTML through a search of the answer's words in the source (markup and whitespace allowed
between them, the same occurrence as in the indexed text); PDF and DOCX, which editors do not open as text,
give line 1, column 1 (their page is in the answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spanqa.ingest.loaders import HEAD_BYTES, LoadError, decode_file_text, detect_format, normalize_whitespace
from spanqa.types import Place

if TYPE_CHECKING:
    from spanqa.ingest.catalog import Catalog
    from spanqa.types import Answer, Document

# What may stand between two words of an answer in a source file: whitespace, tags, Markdown emphasis and
# code marks, link brackets.
_MARKUP_GAP = r"(?:\s|<[^>]*>|[*_`~\[\]]|\]\([^)]*\))*"


@dataclass(frozen=True)
class FilePosition:
    """A 1-based line and column (in bytes, as grep tools count them) in a file."""

    line: int
    column: int


# Encodings that write a byte-order mark: columns count the bytes of the text, not of a BOM.
_WITHOUT_BOM = {"utf-8-sig": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}


def _position(raw: str, offset: int, encoding: str) -> FilePosition:
    line_start = raw.rfind("\n", 0, offset) + 1
    codec = _WITHOUT_BOM.get(encoding, encoding)
    column = len(raw[line_start:offset].encode(codec, errors="replace")) + 1
    return FilePosition(raw.count("\n", 0, offset) + 1, column)


def _words_pattern(text: str) -> re.Pattern[str] | None:
    words = re.findall(r"\w+|[^\w\s]", text)
    if not words:
        return None
    return re.compile(_MARKUP_GAP.join(re.escape(word) for word in words), re.IGNORECASE)


def file_position(path: Path, indexed_text: str, char_start: int, char_end: int) -> FilePosition:
    """The line and column in ``path`` where ``indexed_text[char_start:char_end]`` begins.

    Args:
        path: the document's file.
        indexed_text: the document's text as the catalog holds it.
        char_start: where the answer starts in it.
        char_end: where it ends.

    Returns:
        The position in the file; line 1, column 1 where the file is gone, not text (PDF, DOCX), or no
        longer holds the answer.
    """
    start_of_file = FilePosition(1, 1)
    answer = indexed_text[char_start:char_end]
    try:
        data = path.read_bytes()
        fmt = detect_format(path, data[:HEAD_BYTES])
        if fmt not in ("txt", "md", "html"):
            return start_of_file
        raw, encoding = decode_file_text(data, fmt)
    except (OSError, LoadError):
        return start_of_file
    if fmt == "txt":
        normalized, source_index = normalize_whitespace(raw)
        # The file still holds this text where the catalog says: the normalization maps straight back.
        if char_start < len(source_index) and normalized[char_start:char_end].split() == answer.split():
            return _position(raw, source_index[char_start], encoding)
    pattern = _words_pattern(answer)
    if pattern is None:
        return start_of_file
    # The same occurrence as in the indexed text: the k-th match there is taken to be the k-th in the file.
    occurrence = sum(1 for match in pattern.finditer(indexed_text, 0, char_end) if match.start() < char_start)
    matches = list(pattern.finditer(raw))
    if not matches:
        return start_of_file
    return _position(raw, matches[min(occurrence, len(matches) - 1)].start(), encoding)


#: Formats an editor opens as the text spanqa reads: their answers are placed by line and column.
LINE_FORMATS = frozenset({"txt", "md", "html"})


class Places:
    """Where answers lie in the files on disk (see ingest/positions.py), each document read once."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._documents: dict[str, Document | None] = {}

    def _document(self, document_id: str) -> Document | None:
        if document_id not in self._documents:
            self._documents[document_id] = self.catalog.get_document(document_id)
        return self._documents[document_id]

    def position(self, path: str, document_id: str, start: int, end: int) -> tuple[int, int] | None:
        """(line, column) in the file, or None for a format editors do not open as its text (PDF, ...)."""
        document = self._document(document_id)
        if document is None or document.format not in LINE_FORMATS or not document.text:
            return None
        found = file_position(Path(path), document.text, start, end)
        return found.line, found.column

    def page_label(self, document_id: str, page: int | None) -> str | None:
        """The printed label of a document's page (1-based, physical), where one is known."""
        document = self._document(document_id)
        return document.page_label(page) if document is not None and page is not None else None

    def of_answer(self, answer: Answer) -> Place:
        """Where an answer lies in its file: its line and column, or its page's printed label."""
        at = self.position(answer.path, answer.document_id, answer.char_start, answer.char_end)
        label = self.page_label(answer.document_id, answer.page)
        return Place(at[0], at[1], label) if at else Place(page_label=label)

    def describe(self, path: str, document_id: str, start: int, end: int, page: int | None) -> str:
        """``path:LINE:COLUMN`` as compilers print it; ``path (page 42)`` by the printed label, with the
        physical page where the two differ (``path (page xii, PDF page 14)``); or the path."""
        if page is not None:
            label = self.page_label(document_id, page)
            if label is None or label == str(page):
                return f"{path} (page {page})"
            return f"{path} (page {label}, PDF page {page})"
        at = self.position(path, document_id, start, end)
        return f"{path}:{at[0]}:{at[1]}" if at else path
