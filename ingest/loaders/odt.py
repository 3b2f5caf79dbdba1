"""OpenDocument text (.odt): one ``content.xml`` whose headings (with their outline levels), paragraphs, list
items and table cells become blocks the way a DOCX's do."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from spanqa.ingest.loaders.base import LoadedText
from spanqa.ingest.loaders.text import _joined_blocks, _map_blocks, normalize_whitespace
from spanqa.ingest.loaders.zipped import PackagedError, local_name, open_zip, read_xml


def odt_blocks(data: bytes) -> list[tuple[str, int]]:
    """The headings (with their outline level), paragraphs, list items and table cells of an .odt, in order.

    Raises:
        PackagedError: a corrupt or oversized archive, or no readable content.xml.
    """
    with open_zip(data, "ODT") as archive:
        root = read_xml(archive, "content.xml", "ODT")
    body = next((e for e in root.iter() if local_name(e.tag) == "text" and e is not root), None)
    if body is None:
        raise PackagedError("corrupt ODT: content.xml has no text body")
    blocks: list[tuple[str, int]] = []
    # Iterative walk: paragraphs and headings are leaves; lists, sections and tables are walked into.
    stack = list(reversed(list(body)))
    while stack:
        element = stack.pop()
        name = local_name(element.tag)
        if name in ("p", "h"):
            level = 0
            if name == "h":
                level = next(
                    (
                        int(v)
                        for k, v in element.attrib.items()
                        if local_name(k) == "outline-level" and v.isdigit()
                    ),
                    1,
                )
            blocks.append((_odt_text(element), level))
        elif name not in ("tracked-changes", "sequence-decls", "variable-decls", "user-field-decls"):
            stack.extend(reversed(list(element)))
    return blocks


def _odt_text(element: ET.Element) -> str:
    """A paragraph's text: spaces (``text:s``), tabs and line breaks as the characters they stand for; notes
    and annotations left out."""
    out: list[str] = []
    stack: list[ET.Element | str] = [element]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        name = local_name(item.tag)
        if item is not element and name in ("note", "annotation"):
            if item.tail:
                stack.append(item.tail)
            continue
        if name == "s":
            count = next((int(v) for k, v in item.attrib.items() if local_name(k) == "c" and v.isdigit()), 1)
            out.append(" " * min(count, 1000))
        elif name == "tab":
            out.append("\t")
        elif name == "line-break":
            out.append("\n")
        if item is not element and item.tail:
            stack.append(item.tail)
        stack.extend(reversed(list(item)))
        if item.text and name not in ("s", "tab", "line-break"):
            stack.append(item.text)
    return "".join(out)


def load(data: bytes) -> LoadedText:
    raw, raw_blocks = _joined_blocks(odt_blocks(data))
    text, source_index = normalize_whitespace(raw)
    return LoadedText(text, "odt", [], blocks=_map_blocks(raw_blocks, text, source_index))
