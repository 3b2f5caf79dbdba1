"""EPUB e-books: XHTML chapters in a zip, read in spine order, each titled by its table-of-contents entry
where the chapter has no title of its own, joined into one HTML document that the HTML loader reads
(headings, definition lists, tables, code, as for any page)."""

from __future__ import annotations

import posixpath
import re
import xml.etree.ElementTree as ET
import zipfile
from html import escape

from spanqa.ingest.loaders.base import LoadedText
from spanqa.ingest.loaders.html import _html_walk, structured
from spanqa.ingest.loaders.zipped import PackagedError, local_name, open_zip, read_xml

_BODY = re.compile(r"<body[^>]*>(.*)</body\s*>", re.IGNORECASE | re.DOTALL)
_HEADING_START = re.compile(r"<h[1-6][\s>]", re.IGNORECASE)


def epub_html(data: bytes) -> str:
    """The chapters of an EPUB, in spine order, as one HTML document (see the module docstring).

    Raises:
        PackagedError: a corrupt or oversized archive, or one without a readable package document.
    """
    with open_zip(data, "EPUB") as archive:
        container = read_xml(archive, "META-INF/container.xml", "EPUB")
        rootfile = next(
            (e.get("full-path") for e in container.iter() if local_name(e.tag) == "rootfile"), None
        )
        if not rootfile:
            raise PackagedError("corrupt EPUB: META-INF/container.xml names no package document")
        package = read_xml(archive, rootfile, "EPUB")
        base = posixpath.dirname(rootfile)
        manifest: dict[str, tuple[str, str, str]] = {}  # id -> (path, media type, properties)
        spine: list[str] = []
        toc_id = None
        for element in package.iter():
            name = local_name(element.tag)
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
                if local_name(link.tag) == "a" and link.get("href"):
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link.get("href", "")))
                    titles.setdefault(target.split("#")[0], " ".join("".join(link.itertext()).split()))
    if toc_id and toc_id in manifest:
        path = manifest[toc_id][0]
        try:
            ncx = ET.fromstring(archive.read(path))
        except (KeyError, ET.ParseError):
            return titles
        for point in ncx.iter():
            if local_name(point.tag) != "navPoint":
                continue
            label = next((e for e in point.iter() if local_name(e.tag) == "text"), None)
            content = next((e for e in point if local_name(e.tag) == "content"), None)
            if label is not None and content is not None and content.get("src"):
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), content.get("src", "")))
                titles.setdefault(target.split("#")[0], " ".join("".join(label.itertext()).split()))
    return titles


def load(data: bytes) -> LoadedText:
    return structured(_html_walk(epub_html(data)), "epub")
