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

from ingest.loaders import HEAD_BYTES, LoadError, decode_file_text, detect_format, normalize_whitespace

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
