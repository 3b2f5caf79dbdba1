"""Format loaders: read a file, pick its loader by content as well as extension, extract and normalize text.

One module per format (``txt``, ``md`` and ``html``, ``pdf``, ``docx``, ``odt``, ``epub``, ``man``) behind the
registry in ``registry``; detection (``detect``) and decoding (``decode``) apart. Every user-level problem
(missing, unreadable, binary, corrupt, encrypted, too large) is a ``LoadError`` whose message is one short
line fit to show a user and store in the catalog; no traceback ever escapes; a file with nothing to index
(empty, a man page alias) is a ``NotADocument``. Heavy parsers (pypdf, python-docx, BeautifulSoup,
markdown-it, charset-normalizer) are imported only when used.
"""

from __future__ import annotations

import logging
import stat as stat_module
from pathlib import Path

from spanqa.errors import first_line
from spanqa.ingest.loaders.base import (
    CODE,
    HEAD_BYTES,
    HEADER_ROW,
    HEADING,
    ITEM,
    MB,
    NAVIGATION,
    NON_CONTENT_KINDS,
    ROW,
    RUNNING,
    TERM,
    TEXT,
    Block,
    LoadedText,
    LoadError,
    NotADocument,
    PageSpan,
)
from spanqa.ingest.loaders.decode import _sniff_head, decode_file_text
from spanqa.ingest.loaders.detect import BINARY_EXTENSIONS, detect_format, looks_like_text
from spanqa.ingest.loaders.pdf import running_lines
from spanqa.ingest.loaders.registry import LOADER_VERSIONS, LOADERS, SUPPORTED_EXTENSIONS, Loader
from spanqa.ingest.loaders.text import normalize_whitespace, unwrap_lines

__all__ = [
    "BINARY_EXTENSIONS",
    "CODE",
    "HEADER_ROW",
    "HEADING",
    "HEAD_BYTES",
    "ITEM",
    "LOADERS",
    "LOADER_VERSIONS",
    "MB",
    "NAVIGATION",
    "NON_CONTENT_KINDS",
    "ROW",
    "RUNNING",
    "SUPPORTED_EXTENSIONS",
    "TERM",
    "TEXT",
    "Block",
    "LoadError",
    "LoadedText",
    "Loader",
    "NotADocument",
    "PageSpan",
    "decode_file_text",
    "detect_format",
    "load_file",
    "looks_like_text",
    "normalize_whitespace",
    "running_lines",
    "unwrap_lines",
]

logger = logging.getLogger(__name__)


def _read_bytes(path: Path, max_bytes: int | None) -> bytes:
    """Read a file, checking existence, type, permissions and size (before reading) first."""
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise LoadError("file not found") from exc
    except PermissionError as exc:
        raise LoadError("permission denied") from exc
    except OSError as exc:
        raise LoadError(f"cannot read file: {exc.strerror or first_line(exc)}") from exc
    if stat_module.S_ISDIR(stat.st_mode):
        raise LoadError("is a directory")
    if not stat_module.S_ISREG(stat.st_mode):  # a FIFO or device would block or never end
        raise LoadError("not a regular file")
    if max_bytes is not None and stat.st_size > max_bytes:
        raise LoadError(_too_large(stat.st_size, max_bytes))
    try:
        with path.open("rb") as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except PermissionError as exc:
        raise LoadError("permission denied") from exc
    except OSError as exc:
        raise LoadError(f"cannot read file: {exc.strerror or first_line(exc)}") from exc
    if max_bytes is not None and len(data) > max_bytes:  # grew since stat, or a special file
        raise LoadError(_too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"too large ({size / MB:.1f} MB > {max_bytes / MB:g} MB limit; raise SPANQA_MAX_FILE_MB)"


def load_file(path: Path, *, max_bytes: int | None = None) -> LoadedText:
    """Read a file, detect its format, extract its text and normalize it.

    Args:
        path: the file to load.
        max_bytes: refuse files larger than this (checked before reading); None for no limit.

    Returns:
        The normalized text, its format, its structure, PDF page spans and the detected text encoding.

    Raises:
        NotADocument: nothing to index (an empty or blank file, a man page that only points at another).
        LoadError: for every user-level problem (not found, permission denied, binary, unsupported,
            corrupt or encrypted PDF, corrupt DOCX, EPUB or ODT, too large, undecodable, no text found).
    """
    path = Path(path)
    data = _read_bytes(path, max_bytes)
    if not data.strip():
        raise NotADocument("empty file")
    head = data[:HEAD_BYTES]
    fmt = detect_format(path, head)
    if fmt is None:
        suffix = path.suffix.lower()
        if suffix in SUPPORTED_EXTENSIONS or _sniff_head(head) is None:
            raise LoadError("binary file")
        raise LoadError(f"unsupported file type ({suffix or 'no extension'})")
    try:
        loaded = LOADERS[fmt].load(data)
    except LoadError:
        raise
    except RecursionError as exc:
        raise LoadError(f"cannot parse {fmt}: too deeply nested") from exc
    except Exception as exc:  # a parser bug or an odd file: never let a traceback reach the user
        logger.debug("unexpected error loading %s", path, exc_info=True)
        raise LoadError(f"cannot parse {fmt}: {first_line(exc)}") from exc
    if not loaded.text:
        if fmt == "pdf":
            raise LoadError("no text found (image-only PDF? OCR is not supported)")
        raise LoadError("no text found")
    return loaded
