"""Plain text (and any text of a type without a loader of its own): paragraphs, titles, unwrapped lines."""

from __future__ import annotations

from spanqa.ingest.loaders.base import LoadedText
from spanqa.ingest.loaders.decode import decode_file_text
from spanqa.ingest.loaders.text import _plain_text_blocks, normalize_whitespace, unwrap_lines


def load(data: bytes) -> LoadedText:
    raw, encoding = decode_file_text(data, "txt")
    text, _ = normalize_whitespace(raw)
    blocks = _plain_text_blocks(text)
    return LoadedText(unwrap_lines(text, blocks), "txt", [], encoding, blocks)
