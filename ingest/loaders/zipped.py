"""Zipped formats (DOCX, EPUB, OpenDocument text): which one a zip is, and the guard every one passes first:
a few kilobytes on disk must not become gigabytes in memory (``MAX_UNPACKED``)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zipfile

from spanqa.ingest.loaders.base import MB, LoadError

#: Zipped formats, each with its loader.
ZIP_FORMATS = ("docx", "epub", "odt")
#: The most a zipped document may unpack to.
MAX_UNPACKED = 200 * MB

EPUB_MIMETYPE = b"application/epub+zip"
ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"


class PackagedError(LoadError):
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


def read_xml(archive: zipfile.ZipFile, name: str, kind: str) -> ET.Element:
    try:
        return ET.fromstring(archive.read(name))
    except KeyError as exc:
        raise PackagedError(f"corrupt {kind}: {name} is missing") from exc
    except ET.ParseError as exc:
        raise PackagedError(f"corrupt {kind}: {name} is not well-formed XML ({exc})") from exc


def local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
