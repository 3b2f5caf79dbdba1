"""The dense retriever: a question -> the nearest chunks in the active collection."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from retriever.encoder import TextEncoder
from retriever.index import SearchFilter, SearchHit, VectorIndex

logger = logging.getLogger(__name__)


@dataclass
class RetrievalResult:
    hits: list[SearchHit]
    encode_seconds: float
    search_seconds: float


class DenseRetriever:
    """Bi-encoder retrieval over one vector collection.

    Args:
        encoder: embeds the query (the same model that embedded the chunks).
        index: the vector index.
        collection: the collection to search.
    """

    def __init__(self, *, encoder: TextEncoder, index: VectorIndex, collection: str) -> None:
        self.encoder = encoder
        self.index = index
        self.collection = collection

    def run(
        self,
        query: str,
        *,
        top_k: int = 10,
        document_ids: Sequence[str] | None = None,
    ) -> RetrievalResult:
        """The ``top_k`` chunks nearest to ``query``, best first.

        Args:
            query: the question or search text.
            top_k: how many chunks.
            document_ids: search only these documents (None: all).

        Returns:
            The hits with their cosine scores, and the time spent encoding and searching.
        """
        started = time.perf_counter()
        vector = self.encoder.encode([query])[0]
        encoded = time.perf_counter()
        search_filter = SearchFilter(document_ids=list(document_ids)) if document_ids is not None else None
        hits = self.index.search(self.collection, vector, limit=top_k, filter=search_filter)
        return RetrievalResult(
            hits=hits, encode_seconds=encoded - started, search_seconds=time.perf_counter() - encoded
        )
