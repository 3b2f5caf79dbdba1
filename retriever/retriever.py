"""The retriever: a question -> the best chunks of the active collection: dense, lexical (BM25) or fused."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from spanqa.retriever.encoder import TextEncoder
from spanqa.retriever.index import SearchFilter, SearchHit, VectorIndex
from spanqa.retriever.lexical import Bm25Encoder, reciprocal_rank_fusion, weighted_score_fusion
from spanqa.settings import CHOICES, Settings

RETRIEVAL_MODES = CHOICES["retrieval"]
FUSION_METHODS = CHOICES["fusion"]
#: Hits taken from each of the dense and lexical lists before they are fused.
FUSION_CANDIDATES = 50
#: Hits searched per hit returned, so that folding near-duplicates still leaves ``top_k``; when it does not
#: (a corpus of many copies), the search is made deeper, up to ``MAX_FOLD_DEPTH`` times ``top_k``.
FOLD_DEPTH = 2
MAX_FOLD_DEPTH = 16


@dataclass(frozen=True)
class ListPosition:
    """Where a hit stood in one list before fusion: its score there and its 1-based rank."""

    score: float
    rank: int


@dataclass
class RetrievalResult:
    """Hits, best first; in hybrid mode ``score`` is the fused score.

    ``dense`` and ``lexical`` give, by hit id, where each hit stood in the cosine and BM25 lists (empty for
    a list that was not searched). ``copies`` gives, by hit id, the lower hits of its near-duplicate group
    (the ``fold`` in their payloads), folded into it.
    """

    hits: list[SearchHit]
    encode_seconds: float
    search_seconds: float
    dense: dict[str, ListPosition] = field(default_factory=dict)
    lexical: dict[str, ListPosition] = field(default_factory=dict)
    copies: dict[str, list[SearchHit]] = field(default_factory=dict)


class Retriever:
    """Bi-encoder and BM25 retrieval over one collection, alone or fused.

    Args:
        encoder: embeds the query (the same model that embedded the chunks).
        index: the vector index.
        collection: the collection to search.
        mode: "dense" (cosine), "lexical" (BM25) or "hybrid" (both, fused).
        fusion: "rrf" (reciprocal rank fusion) or "weighted" (min-max scaled scores, weighted sum).
        lexical_weight: the lexical list's weight in the fusion (the dense list's is 1).
        candidates: hits taken from each list before fusing.
        fold: read one passage per near-duplicate group (the groups made at ingest), the others as its
            copies; False: every hit is a passage of its own.
    """

    def __init__(
        self,
        *,
        encoder: TextEncoder,
        index: VectorIndex,
        collection: str,
        mode: str = Settings.retrieval,
        fusion: str = Settings.fusion,
        lexical_weight: float = Settings.lexical_weight,
        candidates: int = FUSION_CANDIDATES,
        fold: bool = True,
    ) -> None:
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"retrieval must be one of {', '.join(RETRIEVAL_MODES)}, not {mode!r}")
        if fusion not in FUSION_METHODS:
            raise ValueError(f"fusion must be one of {', '.join(FUSION_METHODS)}, not {fusion!r}")
        self.encoder = encoder
        self.index = index
        self.collection = collection
        self.mode = mode
        self.fusion = fusion
        self.lexical_weight = lexical_weight
        self.candidates = candidates
        self.fold = fold
        self.lexical = Bm25Encoder()

    def run(
        self,
        query: str,
        *,
        top_k: int = 10,
        document_ids: Sequence[str] | None = None,
    ) -> RetrievalResult:
        """The ``top_k`` best chunks for ``query``, best first.

        Args:
            query: the question or search text.
            top_k: how many chunks.
            document_ids: search only these documents (None: all).

        Returns:
            The hits with their scores (cosine, BM25 or fused), and the time spent encoding and searching.
        """
        started = time.perf_counter()
        mode = self.mode
        terms = self.lexical.query(query) if mode != "dense" else None
        if terms is not None and (not terms.indices or not self.index.has_lexical(self.collection)):
            # Only stop words, or a collection made before lexical retrieval (`spanqa reindex` adds it).
            mode = "dense"
        vector = self.encoder.encode([query])[0] if mode != "lexical" else None
        encoded = time.perf_counter()
        search_filter = SearchFilter(document_ids=list(document_ids)) if document_ids is not None else None
        depth = top_k * (FOLD_DEPTH if self.fold else 1)
        if mode == "hybrid":
            depth = max(depth, self.candidates)
        while True:
            dense: list[SearchHit] = []
            lexical: list[SearchHit] = []
            if vector is not None:
                dense = self.index.search(self.collection, vector, limit=depth, filter=search_filter)
            if mode != "dense" and terms is not None:
                lexical = self.index.search_lexical(self.collection, terms, limit=depth, filter=search_filter)
            hits = dense if mode == "dense" else lexical if mode == "lexical" else self._fuse(dense, lexical)
            kept, copies = fold(hits, top_k) if self.fold else (hits[:top_k], {})
            more = len(dense) == depth or len(lexical) == depth  # a list was cut: deeper finds more groups
            if len(kept) >= top_k or not more or depth >= top_k * MAX_FOLD_DEPTH:
                break
            depth *= 2
        return RetrievalResult(
            hits=kept,
            encode_seconds=encoded - started,
            search_seconds=time.perf_counter() - encoded,
            dense=_positions(dense),
            lexical=_positions(lexical),
            copies=copies,
        )

    def _fuse(self, dense: list[SearchHit], lexical: list[SearchHit]) -> list[SearchHit]:
        """One ranking from both lists; ties keep the dense order."""
        if self.fusion == "rrf":
            scores = reciprocal_rank_fusion(
                [[h.id for h in dense], [h.id for h in lexical]], weights=[1.0, self.lexical_weight]
            )
        else:
            scores = weighted_score_fusion(
                [{h.id: h.score for h in dense}, {h.id: h.score for h in lexical}],
                weights=[1.0, self.lexical_weight],
            )
        payloads = {h.id: h.payload for h in lexical}
        payloads.update((h.id, h.payload) for h in dense)
        order: dict[str, int] = {}
        for rank, item in enumerate([h.id for h in dense] + [h.id for h in lexical]):
            order.setdefault(item, rank)
        ranked = sorted(scores, key=lambda item: (-scores[item], order[item]))
        return [SearchHit(item, scores[item], payloads[item]) for item in ranked]


def fold(hits: Sequence[SearchHit], top_k: int) -> tuple[list[SearchHit], dict[str, list[SearchHit]]]:
    """The best ``top_k`` hits of distinct near-duplicate groups, and by kept hit id its group's lower hits.

    A hit's group is its payload's ``fold`` (set at ingest), else its own id.
    """
    kept: list[SearchHit] = []
    copies: dict[str, list[SearchHit]] = {}
    first: dict[str, str] = {}  # group -> the id of its best hit
    for hit in hits:
        group = str(hit.payload.get("fold") or hit.id)
        if group in first:
            copies.setdefault(first[group], []).append(hit)
        elif len(kept) < top_k:
            first[group] = hit.id
            kept.append(hit)
    return kept, copies


def _positions(hits: list[SearchHit]) -> dict[str, ListPosition]:
    return {hit.id: ListPosition(hit.score, rank) for rank, hit in enumerate(hits, start=1)}
