"""Which loader reads a file: by content first (PDF magic, a zip's members, an HTML start, man source, a
gzipped man page's name), then by the extensions the loaders claim; text of a type without a loader of its own
is plain text."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from spanqa.ingest.loaders.base import HEAD_BYTES
from spanqa.ingest.loaders.decode import _sniff_head
from spanqa.ingest.loaders.man import GZIP_MAGIC, MAN_NAME, looks_like_man
from spanqa.ingest.loaders.registry import EXTENSION_FORMATS
from spanqa.ingest.loaders.zipped import ZIP_FORMATS, zip_format

#: Never read as text, whatever their first bytes look like (archives, images, media, office files spanqa
#: does not read, compiled code).
_BINARY_EXTENSION_LIST = """
.zip .gz .tgz .bz2 .xz .7z .tar .jar .png .jpg .jpeg .gif .bmp .ico .webp .svgz .mp3 .mp4 .wav .ogg .avi .mov
.mkv .doc .xls .xlsx .ppt .pptx .ods .odp .pyc .o .so .a .dll .exe .bin .class .db .sqlite .sqlite3
.woff .woff2 .ttf .otf
"""
BINARY_EXTENSIONS = frozenset(_BINARY_EXTENSION_LIST.split())
_HTML_START = re.compile(
    r"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL
)


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
    ext_format = EXTENSION_FORMATS.get(path.suffix.lower())
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
