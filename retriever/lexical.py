"""Lexical retrieval: BM25 term weights as sparse vectors, and the fusion of ranked lists.

BM25 is split the way Qdrant's sparse vectors with the IDF modifier expect: the document side (term frequency
saturated by ``k1`` and normalized by length with ``b``) is computed here and stored in each point beside its
dense vector; the IDF side is computed by Qdrant over the collection at query time, so it follows every
upsert and delete with no index of our own to keep in step. A query is its unique terms, each weighted 1.

The tokenizer is made for technical text: identifiers stay whole *and* are split into their parts
(``shared_buffers`` -> ``shared_buffers``, ``shared``, ``buffers``; ``--invert-match`` -> ``--invert-match``,
``invert``, ``match``; ``core.abbrev`` -> ``core.abbrev``, ``core``, ``abbrev``), so a question that names one
exactly finds it, and one that names its words finds it too. Plain words are lower-cased and stemmed
(Snowball English), and a short list of English stop words is dropped.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spanqa.scoring import min_max

#: BM25's term-frequency saturation and length normalization (the usual values).
BM25_K1 = 1.2
BM25_B = 0.75
#: The length (in terms) a chunk is normalized against. A constant, so a chunk's weights never change when
#: others are added: about what a 200-token chunk yields once stop words are gone.
BM25_AVG_LENGTH = 100.0
#: Reciprocal rank fusion's k (Cormack et al., 2009).
RRF_K = 60

# A token: a run of word characters, possibly joined by . _ - / : (an identifier, a path, a version),
# optionally led by dashes (a command-line option).
_TOKEN = re.compile(r"-{0,2}\w+(?:[._\-/:+]\w+)*", re.UNICODE)
_PART = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP_WORDS = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from", "had"),
        *("has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or", "so", "such"),
        *("that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "were", "what"),
        *("when", "where", "which", "who", "whom", "why", "will", "with", "you", "your"),
    )
)


@dataclass(frozen=True)
class SparseVector:
    """Term ids and weights (ids unique, in any order)."""

    indices: list[int]
    values: list[float]


_local = threading.local()


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    # A Snowball stemmer keeps its state in the object: one per thread (ingest and asks may overlap).
    stemmer: Any = getattr(_local, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def tokenize(text: str) -> list[str]:
    """The terms of ``text``: identifiers whole and split, plain words stemmed, stop words dropped."""
    stem = _stem
    terms: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        lower = token.lower()
        parts = _PART.findall(token)
        is_identifier = len(parts) > 1 or token.startswith("-") or "_" in token
        camel = _CAMEL.findall(parts[0]) if len(parts) == 1 and not is_identifier else []
        if is_identifier or len(camel) > 1:
            terms.append(lower)
            pieces = parts if is_identifier else camel
            terms.extend(stem(p.lower()) for p in pieces if p.lower() not in _STOP_WORDS)
        elif lower not in _STOP_WORDS:
            terms.append(stem(lower))
    return terms


def term_id(term: str) -> int:
    """A stable id for a term (CRC-32: the same in every process and version, no vocabulary to store)."""
    return zlib.crc32(term.encode("utf-8"))


class Bm25Encoder:
    """Texts -> BM25 sparse vectors (document side) and queries -> unit term vectors.

    Args:
        k1: term-frequency saturation.
        b: length normalization.
        avg_length: the length a document is normalized against, in terms.
    """

    def __init__(
        self, *, k1: float = BM25_K1, b: float = BM25_B, avg_length: float = BM25_AVG_LENGTH
    ) -> None:
        self.k1 = k1
        self.b = b
        self.avg_length = avg_length

    def document(self, text: str) -> SparseVector:
        """The BM25 term-frequency weights of ``text`` (IDF is applied by the index at query time)."""
        terms = tokenize(text)
        norm = self.k1 * (1.0 - self.b + self.b * len(terms) / self.avg_length)
        weights: dict[int, float] = {}
        for term, tf in Counter(terms).items():
            index = term_id(term)
            weights[index] = weights.get(index, 0.0) + tf * (self.k1 + 1.0) / (tf + norm)
        return SparseVector(list(weights), list(weights.values()))

    def query(self, text: str) -> SparseVector:
        """Each unique term of ``text`` with weight 1 (so a hit scores the sum of its terms' BM25)."""
        indices = sorted({term_id(term) for term in tokenize(text)})
        return SparseVector(indices, [1.0] * len(indices))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, k: int = RRF_K, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Fuse ranked lists of ids: each id scores ``sum(weight / (k + rank))`` over the lists it is in.

    Args:
        rankings: ids, best first, one list per retriever.
        k: damps the weight of the top ranks.
        weights: one per list (default 1 each).

    Returns:
        Fused scores by id (higher is better).
    """
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


def weighted_score_fusion(
    scored: Sequence[Mapping[str, float]], *, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Fuse scored lists: each list min-max scaled to [0, 1], then a weighted sum (missing counts as 0).

    Args:
        scored: scores by id, one mapping per retriever.
        weights: one per mapping (default: equal weights summing to 1).

    Returns:
        Fused scores by id, in [0, sum(weights)].
    """
    weights = list(weights) if weights is not None else [1.0 / max(len(scored), 1)] * len(scored)
    if len(weights) != len(scored):
        raise ValueError("one weight per score list")
    fused: dict[str, float] = {}
    for scores, weight in zip(scored, weights, strict=True):
        for item, value in min_max(scores).items():
            fused[item] = fused.get(item, 0.0) + weight * value
    return fused
