"""DOCX (python-docx): paragraphs and table cells in document order, headings by style and outline level."""

from __future__ import annotations

import io
import re
from typing import Any

from spanqa.errors import first_line
from spanqa.ingest.loaders.base import LoadedText, LoadError
from spanqa.ingest.loaders.text import _joined_blocks, _map_blocks, normalize_whitespace
from spanqa.ingest.loaders.zipped import open_zip


def _docx_blocks(data: bytes) -> list[tuple[str, int]]:
    """Paragraph and table-cell texts of a .docx in document order (headers, footers, text boxes left out),
    each with its heading level (see ``_docx_heading_level``; 0 for body text)."""
    from docx import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    if data.startswith(b"\xd0\xcf\x11\xe0"):  # OLE2: a legacy .doc, or a password-protected Office file
        raise LoadError("not a .docx file (password-protected, or an old .doc)")
    open_zip(data, "DOCX").close()  # refused before python-docx unpacks and parses it whole
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


def load(data: bytes) -> LoadedText:
    """A .docx's paragraphs and table cells as blocks, headings titling what follows."""
    raw, raw_blocks = _joined_blocks(_docx_blocks(data))
    text, source_index = normalize_whitespace(raw)
    return LoadedText(text, "docx", [], blocks=_map_blocks(raw_blocks, text, source_index))
