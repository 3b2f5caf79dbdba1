"""Text files' bytes to text, and whether bytes are text at all: BOM, declared charset, UTF-8, UTF-16, cp1252,
then charset detection."""

from __future__ import annotations

import codecs
import logging
import re

from spanqa.ingest.loaders.base import HEAD_BYTES, LoadError

logger = logging.getLogger(__name__)

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Control chars that real text files do not contain (tab, newlines, form feed, backspace and ESC are allowed).
_BINARY_CONTROLS = re.compile("[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f]")
_NON_ASCII = re.compile("[^\x00-\x7f]")


def _bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def _utf16_without_bom(head: bytes) -> str | None:
    """Guess UTF-16 LE/BE text without a BOM from where its NUL bytes fall (ASCII-heavy text only)."""
    sample = head[: len(head) - len(head) % 2]
    if len(sample) < 4:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    if odd_nuls >= 0.3 * half and even_nuls <= 0.02 * half:
        return "utf-16-le"
    if even_nuls >= 0.3 * half and odd_nuls <= 0.02 * half:
        return "utf-16-be"
    return None


def _looks_like_text(text: str) -> bool:
    """False when decoded text is full of control chars (i.e. binary data that happened to decode)."""
    if not text:
        return True
    if "\x00" in text:
        return False
    limit = 0.02 * len(text)
    return all(count <= limit for count, _ in enumerate(_BINARY_CONTROLS.finditer(text), start=1))


def _sniff_head(head: bytes) -> str | None:
    """Decode the head of a file to sniff it, or None when it looks binary."""
    encoding = _bom_encoding(head) or (_utf16_without_bom(head) if b"\x00" in head else None)
    if encoding is None:
        if b"\x00" in head:
            return None
        encoding = "utf-8"
    # An incremental decoder tolerates a multi-byte char cut at the end of the head.
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    try:
        text = decoder.decode(head, final=False)
    except UnicodeDecodeError:
        if encoding != "utf-8":
            return None
        text = head.decode("cp1252", errors="replace")  # legacy 8-bit text; good enough to sniff
    return text if _looks_like_text(text) else None


_HTML_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# What browsers do (WHATWG Encoding): these labels mean windows-1252.
_WINDOWS_1252_ALIASES = frozenset({"latin1", "latin-1", "iso-8859-1", "iso8859-1", "ascii", "us-ascii"})


def _declared_html_charset(data: bytes) -> str | None:
    head = data[:4096]
    match = _XML_ENCODING.match(head) or _HTML_CHARSET.search(head)
    if not match:
        return None
    label = match.group(1).decode("ascii", errors="ignore").lower()
    if label in _WINDOWS_1252_ALIASES:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A UTF-16/32 declaration read from ASCII-compatible bytes is wrong by definition; browsers use UTF-8.
    return "utf-8" if name.startswith(("utf-16", "utf-32")) else name


def _mostly_latin(text: str) -> bool:
    """True when at most 40% of the letters are non-ASCII: Western text, not e.g. Cyrillic read as cp1252."""
    letters = [ch for ch in text[:100_000] if ch.isalpha()]
    if not letters:
        return True
    return sum(1 for ch in letters if ord(ch) > 127) <= 0.4 * len(letters)


def _decode_text(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """Decode the bytes of a text file.

    Order: BOM; the declared charset (HTML); strict UTF-8; UTF-16 without BOM; UTF-8 with a few bad bytes
    replaced; cp1252 for Western 8-bit text; charset-normalizer detection.

    Args:
        data: the file's bytes.
        declared: a charset the document declares, tried right after a BOM.

    Returns:
        (text, encoding name).
    """
    bom = _bom_encoding(data)
    candidates = [bom] if bom else []
    if declared:
        candidates.append(declared)
    candidates.append("utf-8")
    if b"\x00" in data[:HEAD_BYTES]:
        utf16 = _utf16_without_bom(data[:HEAD_BYTES])
        if utf16:
            candidates.append(utf16)
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        if not _looks_like_text(text):
            raise LoadError("binary file")
        return text, codecs.lookup(encoding).name
    if b"\x00" in data:
        raise LoadError("binary file")
    # Mostly UTF-8 with a few bad bytes (a damaged or concatenated file): keep UTF-8, replace the bad bytes.
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if sum(1 for _ in _NON_ASCII.finditer(text)) - bad >= 10 * bad and _looks_like_text(text):
        logger.debug("%d invalid UTF-8 sequences replaced", bad)
        return text, "utf-8"
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        text = ""
    if text and _mostly_latin(text) and _looks_like_text(text):
        return text, "cp1252"
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise LoadError("undecodable text (unknown encoding)")
    text = str(best)
    if not _looks_like_text(text):
        raise LoadError("binary file")
    return text, codecs.lookup(best.encoding).name


def decode_file_text(data: bytes, fmt: str) -> tuple[str, str]:
    """The text of a txt, md or html file's bytes, and its encoding (an HTML file's declared charset first).

    Raises:
        LoadError: binary or undecodable data.
    """
    return _decode_text(data, _declared_html_charset(data) if fmt == "html" else None)
