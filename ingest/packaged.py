"""Zipped document formats beside DOCX: EPUB e-books and OpenDocument text (.odt).

An EPUB is XHTML chapters in a zip: its chapters are read in spine order, each titled by its table-of-contents
entry where the chapter has no title of its own, and joined into one HTML document that the HTML loader reads
(headings, definition lists, tables, code, as for any page). An .odt is one ``content.xml``: its headings
(with their outline levels), paragraphs, list items and table cells become blocks the way a DOCX's do.
Both are zips, so both pass the unpacked-size guard first (``MAX_UNPACKED``): a few kilobytes must not
become gigabytes in memory.
"""

from __future__ import annotations

import io
import posixpath
import re
import xml.etree.ElementTree as ET
import zipfile
from html import escape

MB = 1_000_000
#: The most a zipped document may unpack to.
MAX_UNPACKED = 200 * MB

EPUB_MIMETYPE = b"application/epub+zip"
ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"

_BODY = re.compile(r"<body[^>]*>(.*)</body\s*>", re.IGNORECASE | re.DOTALL)
_HEADING_START = re.compile(r"<h[1-6][\s>]", re.IGNORECASE)


class PackagedError(ValueError):
    """A zipped document that cannot be read; the message is one line."""


def zip_format(archive: zipfile.ZipFile) -> str | None:
    """ "docx", "epub" or "odt" by the zip's members (and its ``mimetype`` entry); None for another zip."""
    names = set(archive.namelist())
    if "word/document.xml" in names:
        return "docx"
    small = "mimetype" in names and archive.getinfo("mimetype").file_size < 200
    mimetype = archive.read("mimetype").strip() if small else b""
    if mimetype == EPUB_MIMETYPE or "META-INF/container.xml" in names:
        return "epub"
    if mimetype == ODT_MIMETYPE or ("content.xml" in names and mimetype.startswith(b"application/vnd.oasis")):
        return "odt" if mimetype in (ODT_MIMETYPE, b"") else None
    return None


def open_zip(data: bytes, kind: str) -> zipfile.ZipFile:
    """The archive, once its members are known to unpack to at most ``MAX_UNPACKED`` bytes."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, RuntimeError) as exc:
        raise PackagedError(f"corrupt {kind}: {exc}") from exc
    if unpacked > MAX_UNPACKED:
        archive.close()
        raise PackagedError(
            f"{kind} unpacks to {unpacked / MB:.0f} MB (more than {MAX_UNPACKED / MB:.0f} MB)"
        )
    return archive


def _xml(archive: zipfile.ZipFile, name: str, kind: str) -> ET.Element:
    try:
        return ET.fromstring(archive.read(name))
    except KeyError as exc:
        raise PackagedError(f"corrupt {kind}: {name} is missing") from exc
    except ET.ParseError as exc:
        raise PackagedError(f"corrupt {kind}: {name} is not well-formed XML ({exc})") from exc


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


# --- EPUB -------------------------------------------------------------------------------------------------


def epub_html(data: bytes) -> str:
    """The chapters of an EPUB, in spine order, as one HTML document (see the module docstring).

    Raises:
        PackagedError: a corrupt or oversized archive, or one without a readable package document.
    """
    with open_zip(data, "EPUB") as archive:
        container = _xml(archive, "META-INF/container.xml", "EPUB")
        rootfile = next((e.get("full-path") for e in container.iter() if _local(e.tag) == "rootfile"), None)
        if not rootfile:
            raise PackagedError("corrupt EPUB: META-INF/container.xml names no package document")
        package = _xml(archive, rootfile, "EPUB")
        base = posixpath.dirname(rootfile)
        manifest: dict[str, tuple[str, str, str]] = {}  # id -> (path, media type, properties)
        spine: list[str] = []
        toc_id = None
        for element in package.iter():
            name = _local(element.tag)
            if name == "item" and element.get("id") and element.get("href"):
                path = posixpath.normpath(posixpath.join(base, element.get("href", "").split("#")[0]))
                manifest[element.get("id", "")] = (
                    path,
                    element.get("media-type", ""),
                    element.get("properties", ""),
                )
            elif name == "spine":
                toc_id = element.get("toc")
            elif name == "itemref" and element.get("idref"):
                spine.append(element.get("idref", ""))
        titles = _toc_titles(archive, manifest, toc_id)
        parts: list[str] = []
        for idref in spine:
            path, media, _ = manifest.get(idref, ("", "", ""))
            if not path or "html" not in media:
                continue
            try:
                markup = archive.read(path).decode("utf-8", errors="replace")
            except KeyError:
                continue  # a spine entry whose file is missing: the others still read
            body = _BODY.search(markup)
            content = body.group(1) if body else markup
            title = titles.get(path)
            if title and not _HEADING_START.search(content):
                content = f"<h1>{escape(title)}</h1>{content}"
            parts.append(f"<section>{content}</section>")
    if not parts:
        raise PackagedError("an EPUB without chapters")
    return "<html><body>" + "".join(parts) + "</body></html>"


def _toc_titles(
    archive: zipfile.ZipFile, manifest: dict[str, tuple[str, str, str]], toc_id: str | None
) -> dict[str, str]:
    """Chapter file -> its table-of-contents title, from the EPUB 3 nav document or the EPUB 2 NCX."""
    titles: dict[str, str] = {}
    for path, _, properties in manifest.values():
        if "nav" in properties.split():
            try:
                nav = ET.fromstring(archive.read(path))
            except (KeyError, ET.ParseError):
                continue
            for link in nav.iter():
                if _local(link.tag) == "a" and link.get("href"):
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link.get("href", "")))
                    titles.setdefault(target.split("#")[0], " ".join("".join(link.itertext()).split()))
    if toc_id and toc_id in manifest:
        path = manifest[toc_id][0]
        try:
            ncx = ET.fromstring(archive.read(path))
        except (KeyError, ET.ParseError):
            return titles
        for point in ncx.iter():
            if _local(point.tag) != "navPoint":
                continue
            label = next((e for e in point.iter() if _local(e.tag) == "text"), None)
            content = next((e for e in point if _local(e.tag) == "content"), None)
            if label is not None and content is not None and content.get("src"):
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), content.get("src", "")))
                titles.setdefault(target.split("#")[0], " ".join("".join(label.itertext()).split()))
    return titles


# --- OpenDocument text ------------------------------------------------------------------------------------


def odt_blocks(data: bytes) -> list[tuple[str, int]]:
    """The headings (with their outline level), paragraphs, list items and table cells of an .odt, in order.

    Raises:
        PackagedError: a corrupt or oversized archive, or no readable content.xml.
    """
    with open_zip(data, "ODT") as archive:
        root = _xml(archive, "content.xml", "ODT")
    body = next((e for e in root.iter() if _local(e.tag) == "text" and e is not root), None)
    if body is None:
        raise PackagedError("corrupt ODT: content.xml has no text body")
    blocks: list[tuple[str, int]] = []
    # Iterative walk: paragraphs and headings are leaves; lists, sections and tables are walked into.
    stack = list(reversed(list(body)))
    while stack:
        element = stack.pop()
        name = _local(element.tag)
        if name in ("p", "h"):
            level = 0
            if name == "h":
                level = next(
                    (
                        int(v)
                        for k, v in element.attrib.items()
                        if _local(k) == "outline-level" and v.isdigit()
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
        name = _local(item.tag)
        if item is not element and name in ("note", "annotation"):
            if item.tail:
                stack.append(item.tail)
            continue
        if name == "s":
            count = next((int(v) for k, v in item.attrib.items() if _local(k) == "c" and v.isdigit()), 1)
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
