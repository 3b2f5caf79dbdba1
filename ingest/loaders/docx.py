"""DOCX (python-docx): paragraphs and table cells in document order, headings by style and outline level,
pages where the file records its page breaks."""

from __future__ import annotations

import io
import re
from typing import Any

from spanqa.errors import first_line
from spanqa.ingest.loaders.base import LoadedText, LoadError, PageSpan
from spanqa.ingest.loaders.text import _joined_blocks, _map_blocks, _normalized_span, normalize_whitespace
from spanqa.ingest.loaders.zipped import open_zip


def _docx_blocks(data: bytes) -> tuple[list[tuple[str, int]], list[int]]:
    """Paragraph and table-cell texts of a .docx in document order (headers, footers, text boxes left out),
    each with its heading level (see ``_docx_heading_level``; 0 for body text), and the page each starts on
    (see ``_page_breaks``; empty when the file records no page break)."""
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
    breaks: list[tuple[tuple[int, int], tuple[int, int]]] = []
    # Iterative walk over body content; nested tables are read cell by cell.
    stack: list[Any] = list(reversed(list(document.iter_inner_content())))
    while stack:
        item = stack.pop()
        if isinstance(item, Paragraph):
            blocks.append((item.text, _docx_heading_level(item)))
            breaks.append(_page_breaks(item))
        elif isinstance(item, Table):
            seen: set[int] = set()
            cells: list[Any] = []
            for row in item.rows:
                for cell in row.cells:
                    if id(cell._tc) not in seen:  # merged cells repeat the same element
                        seen.add(id(cell._tc))
                        cells.append(cell)
            stack.extend(reversed([inner for cell in cells for inner in cell.iter_inner_content()]))
    return blocks, _start_pages(breaks)


#: Word's page breaks: where it last laid out a page (saved by Word), and a break typed in.
_RENDERED, _HARD = "lastRenderedPageBreak", "br"


def _page_breaks(paragraph: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """The page breaks in a paragraph, as (before its text, after some of it) for each kind: where Word last
    laid the page out (``w:lastRenderedPageBreak``, saved by Word) and the typed ones (``w:br
    w:type="page"``)."""
    before, after = [0, 0], [0, 0]
    seen_text = False
    for element in paragraph._p.iter():
        tag = element.tag.rpartition("}")[2]
        if tag == "t" and (element.text or "").strip():
            seen_text = True
        elif tag == _RENDERED or (tag == _HARD and element.get(_W_TYPE) == "page"):
            (after if seen_text else before)[0 if tag == _RENDERED else 1] += 1
    return (before[0], after[0]), (before[1], after[1])


_W_TYPE = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}type"


def _start_pages(breaks: list[tuple[tuple[int, int], tuple[int, int]]]) -> list[int]:
    """The page each paragraph starts on. A file Word saved records where its pages broke when last shown
    (those count, as they also follow the typed breaks); another records only typed breaks. None at all: no
    pages are known ([])."""
    use = 0 if any(sum(rendered) for rendered, _ in breaks) else 1
    if not any(sum(b[use]) for b in breaks):
        return []
    pages, page = [], 1
    for kinds in breaks:
        before, after = kinds[use]
        page += before
        pages.append(page)
        page += after
    return pages


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
    """A .docx's paragraphs and table cells as blocks, headings titling what follows; its pages where the
    file records page breaks."""
    items, start_pages = _docx_blocks(data)
    raw, raw_blocks = _joined_blocks(items)
    text, source_index = normalize_whitespace(raw)
    pages: list[PageSpan] = []
    if start_pages:
        firsts: dict[int, int] = {}
        for block, page in zip(raw_blocks, start_pages, strict=True):
            firsts.setdefault(page, block.start)
        numbers = sorted(firsts)
        for number, following in zip(numbers, [*numbers[1:], None], strict=True):
            raw_end = firsts[following] if following is not None else len(raw)
            start, end = _normalized_span(text, source_index, firsts[number], raw_end)
            pages.append(PageSpan(number, start, max(start, end)))
    return LoadedText(text, "docx", pages, blocks=_map_blocks(raw_blocks, text, source_index))
