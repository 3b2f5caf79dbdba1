"""The vector-store point of a chunk, the same at ingest and at re-index."""

from __future__ import annotations

from typing import Any

from spanqa.retriever.index import IndexPoint
from spanqa.retriever.lexical import Bm25Encoder
from spanqa.types import Chunk

_BM25 = Bm25Encoder()


def make_point(chunk: Chunk, path: str, vector: Any) -> IndexPoint:
    """The Qdrant point of a chunk: its vector, its BM25 terms (heading path and text) and where it lives."""
    return IndexPoint(
        id=chunk.id,
        vector=vector,
        sparse=_BM25.document(chunk.search_text),
        payload={
            "document_id": chunk.document_id,
            "chunk_id": chunk.id,
            "path": path,
            "ordinal": chunk.ordinal,
            "char_start": chunk.char_start,
            "char_end": chunk.char_end,
            "page": chunk.page,
            "fold": chunk.fold_label,
        },
    )
