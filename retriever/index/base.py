"""What every vector store offers: the Protocol, its types and errors, and the helpers both backends share.

Points carry chunk ids (UUID strings), a dense vector, BM25 term weights as a sparse vector and a small
payload (document_id, chunk_id, path, ordinal, char_start, char_end, page); collections use cosine distance
and have keyword payload indexes on ``document_id`` and ``path``. One module per backend implements the
Protocol (``edge.py``, ``server.py``), as Haystack keeps ``document_stores/types/protocol.py`` beside one
module per store.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from spanqa.errors import SpanqaError
from spanqa.retriever.lexical import SparseVector
from spanqa.settings import CHOICES

T = TypeVar("T")

#: The sparse vector of each point that holds its BM25 term weights (see ``retriever.lexical``).
LEXICAL_VECTOR = "lexical"
#: How a new collection keeps its dense vectors (the words of the ``vector_quantization`` setting).
VECTOR_QUANTIZATIONS = CHOICES["vector_quantization"]
#: The int8 layout, meant for big stores, walks a denser HNSW graph (links per node, candidates kept while
#: building) with more candidates, and rescores twice ``limit`` of them with the float32 vectors: at a million
#: passages the graph's default (16, 100) with 128 candidates found 91% of the exact top 10, these 99.6%, in
#: 1.4 ms (bench/scale.py, docs/benchmarks.md).
QUANTIZED_HNSW_M, QUANTIZED_EF_CONSTRUCT = 32, 200
QUANTIZED_HNSW_EF, QUANTIZED_OVERSAMPLING = 256, 2.0
#: Payload fields that get a keyword payload index in every collection.
INDEXED_PAYLOAD_FIELDS: tuple[str, ...] = ("document_id", "path")
#: Keep each upsert request under this many (estimated) bytes; servers reject huge bodies.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: And under this many points.
MAX_BATCH_POINTS = 1024
#: Queries sent to a server in one batched search request (each carries a whole vector).
MAX_BATCH_QUERIES = 256
#: Page size for scrolling through point ids.
SCROLL_PAGE = 1024
#: Points at the collection questions are answered from (the catalog's active index version).
ACTIVE_ALIAS = "spanqa_active"

_COLLECTION_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
_SLUG_INVALID_RE = re.compile(r"[^a-z0-9-]+")


class VectorIndexError(SpanqaError):
    """The vector index cannot do what was asked; the message is one line, fit to show to the user."""


class VectorIndexInUseError(VectorIndexError):
    """Another process holds the embedded store (a worker, or another command)."""


class VectorIndexUnavailableError(VectorIndexError):
    """The Qdrant server could not be reached or answered 5xx/429 even after retries: worth retrying later."""


@dataclass(frozen=True)
class IndexPoint:
    """One point to store: a chunk id, its (normalized) vector, its BM25 term weights and its payload."""

    id: str
    vector: Sequence[float]
    payload: dict[str, Any]
    sparse: SparseVector | None = None


@dataclass(frozen=True)
class SearchHit:
    """One search result; ``score`` is the cosine similarity, or the BM25 score of a lexical search."""

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class IndexStats:
    """How a collection stands: its points, how many of their vectors the HNSW graph covers (the rest are
    searched exhaustively, exactly), and its segments."""

    points: int
    indexed: int
    segments: int

    @property
    def unindexed(self) -> int:
        return max(self.points - self.indexed, 0)


@dataclass(frozen=True)
class SearchFilter:
    """Restrict a search to documents and/or paths (``None``: no restriction; ``[]``: matches nothing)."""

    document_ids: Sequence[str] | None = None
    paths: Sequence[str] | None = None

    @classmethod
    def of_document(cls, document_id: str | None) -> SearchFilter | None:
        """Only the points of ``document_id`` (None: no restriction)."""
        return None if document_id is None else cls(document_ids=[document_id])

    def matches_nothing(self) -> bool:
        """Whether an empty (not ``None``) list makes this filter exclude every point."""
        return (self.document_ids is not None and len(self.document_ids) == 0) or (
            self.paths is not None and len(self.paths) == 0
        )

    def conditions(self) -> list[tuple[str, list[str]]]:
        """(payload field, any of these values) pairs that a point must all meet; each backend builds its
        own filter object from them."""
        pairs = []
        if self.document_ids is not None:
            pairs.append(("document_id", list(self.document_ids)))
        if self.paths is not None:
            pairs.append(("path", list(self.paths)))
        return pairs


@runtime_checkable
class VectorIndex(Protocol):
    """What ingest and search need from a vector store.

    A collection holds the points of one retriever model (see :func:`collection_name`); ids are chunk ids.
    Every method raises :class:`VectorIndexError` (one line, fit for the user) when the store cannot do it,
    :class:`VectorIndexUnavailableError` when a server is out of reach (worth retrying).
    """

    def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` (cosine, dense and lexical vectors, payload indexes) unless it exists
        with this dimension; a collection made before lexical vectors existed gets them where the backend
        allows. Raises VectorIndexError when it exists with another dimension."""
        ...

    def has_collection(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        ...

    def list_collections(self) -> list[str]:
        """The names of all collections, sorted."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete collection ``name`` and its points (nothing happens when it does not exist)."""
        ...

    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None:
        """Insert or replace ``points`` (the last wins for a repeated id), in batches that fit a request."""
        ...

    def delete_points(self, name: str, ids: Sequence[str]) -> None:
        """Delete the points with these ids (unknown ids are ignored)."""
        ...

    def delete_document(self, name: str, document_id: str) -> None:
        """Delete every point whose payload names ``document_id``."""
        ...

    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points nearest to ``vector`` by cosine similarity, best first, within ``filter``."""
        ...

    def search_many(
        self, name: str, vectors: Sequence[Sequence[float]], *, limit: int = 1
    ) -> list[list[SearchHit]]:
        """For each vector, the ``limit`` points nearest to it, best first: one request (what folding
        near-duplicates at ingest asks for every chunk)."""
        ...

    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` best points by BM25 (the stored term weights times the query terms' IDF), best first;
        empty when the collection has no lexical vectors (see :meth:`has_lexical`)."""
        ...

    def has_lexical(self, name: str) -> bool:
        """Whether collection ``name`` stores BM25 term weights (collections made before them do not)."""
        ...

    def count(self, name: str, *, document_id: str | None = None) -> int:
        """How many points the collection holds (of one document when ``document_id`` is given)."""
        ...

    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]:
        """The ids of all points (of one document when ``document_id`` is given), in canonical UUID form."""
        ...

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` in one step (the blue/green switch of a re-index)."""
        ...

    def alias_target(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or None."""
        ...

    def stats(self, name: str) -> IndexStats:
        """Points, HNSW-indexed vectors and segments of collection ``name``."""
        ...

    def build_search_index(self, name: str) -> bool:
        """Build the HNSW graph over the vectors that lack it (blocking; a server builds its own as points
        arrive); True when there was anything to build."""
        ...

    def release(self) -> None:
        """Let other processes use the store until this index is used again (the embedded store gives its
        lock back and takes it again, waiting, at the next call); nothing to do for a server."""
        ...

    def lend_when_asked(self) -> None:
        """From now on, give the store to any other process that waits for it, between this index's own
        calls (the embedded store; nothing to do for a server, which every process shares)."""
        ...

    def close(self) -> None:
        """Release the store (the embedded store's lock, a server's connections); safe to call twice."""
        ...


def ranked_hits(points: Iterable[Any], *, positive_only: bool = False) -> list[SearchHit]:
    """Search hits, best first, from a backend's scored points (anything with ``id``, ``score``, ``payload``);
    ``positive_only`` drops points that share no term with a lexical query."""
    hits = [
        SearchHit(str(p.id), float(p.score), dict(p.payload or {}))
        for p in points
        if not positive_only or p.score > 0
    ]
    hits.sort(key=lambda hit: hit.score, reverse=True)
    return hits


class ClosingIndex:
    """Context-manager support for a backend that has ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def collection_name(model_name: str, dimension: int, version: int = 1) -> str:
    """The collection that holds the vectors of one retriever model.

    Args:
        model_name: Hub name or local path of the model; only its last component is used, slugified
            (lowercase, runs of characters outside ``[a-z0-9-]`` become ``-``).
        dimension: The model's vector dimension.
        version: Layout version of the collection (bump to force a re-index).

    Returns:
        A name such as ``chunks__all-minilm-l6-v2__384d__v1``.
    """
    if dimension <= 0:
        raise ValueError(f"dimension must be positive, got {dimension}")
    if version <= 0:
        raise ValueError(f"version must be positive, got {version}")
    last = re.split(r"[/\\]", model_name.strip().rstrip("/\\"))[-1]
    slug = _SLUG_INVALID_RE.sub("-", last.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)[:80].strip("-")
    if not slug:
        raise ValueError(f"cannot derive a collection name from model name {model_name!r}")
    return f"chunks__{slug}__{dimension}d__v{version}"


def normalize_id(point_id: str) -> str:
    """The canonical (lowercase, hyphenated) form of a UUID string.

    Args:
        point_id: A UUID string.

    Returns:
        The canonical UUID string, which is what searches and scrolls return.
    """
    try:
        return str(uuid.UUID(str(point_id)))
    except ValueError:
        raise ValueError(f"point id {point_id!r} is not a UUID string") from None


def to_floats(vector: Sequence[float] | Any) -> list[float]:
    """A plain list of floats from a sequence or a 1-D numpy array."""
    tolist = getattr(vector, "tolist", None)
    values = tolist() if callable(tolist) else list(vector)
    return [float(v) for v in values]


def check_dimension(name: str, vector: list[float], dimension: int | None, what: str) -> None:
    """Raise VectorIndexError when ``vector`` does not have the collection's dimension."""
    if dimension is not None and len(vector) != dimension:
        raise VectorIndexError(
            f"dimension mismatch: collection {name!r} holds {dimension}-d vectors but the {what} "
            f"has {len(vector)} dimensions (was the retriever model changed?)"
        )


def _estimate_point_bytes(vector: list[float], payload: dict[str, Any]) -> int:
    """A generous estimate of one point's size in a JSON request body."""
    return 24 * len(vector) + len(json.dumps(payload, default=str)) + 128


def request_batches(items: list[T], sizes: list[int]) -> Iterator[list[T]]:
    """Split ``items`` into batches of at most MAX_REQUEST_BYTES (by ``sizes``) and MAX_BATCH_POINTS."""
    batch: list[T] = []
    total = 0
    for item, size in zip(items, sizes, strict=True):
        if batch and (total + size > MAX_REQUEST_BYTES or len(batch) >= MAX_BATCH_POINTS):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += size
    if batch:
        yield batch


def slices(items: list[T], size: int) -> Iterator[list[T]]:
    """Fixed-size slices of ``items``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


PreparedPoint = tuple[str, list[float], dict[str, Any], SparseVector | None]


def prepare_points(
    name: str, points: Sequence[IndexPoint], dimension: int | None
) -> tuple[list[PreparedPoint], list[int]]:
    """Normalize ids and vectors (last one wins for duplicate ids) and estimate each point's size."""
    by_id: dict[str, PreparedPoint] = {}
    for point in points:
        vector = to_floats(point.vector)
        check_dimension(name, vector, dimension, f"vector of point {point.id}")
        point_id = normalize_id(point.id)
        sparse = point.sparse if point.sparse is not None and point.sparse.indices else None
        by_id[point_id] = (point_id, vector, dict(point.payload), sparse)
    prepared = list(by_id.values())
    sizes = [
        _estimate_point_bytes(vector, payload) + (24 * len(sparse.indices) if sparse else 0)
        for _, vector, payload, sparse in prepared
    ]
    return prepared, sizes


def check_quantization(quantization: str) -> None:
    """Refuse a ``quantization`` word that no store knows."""
    if quantization not in VECTOR_QUANTIZATIONS:
        choices = ", ".join(VECTOR_QUANTIZATIONS)
        raise ValueError(f"quantization must be one of {choices}, not {quantization!r}")


def check_collection_name(name: str) -> None:
    """Raise ValueError for names that are not safe as a directory or collection name."""
    if not _COLLECTION_NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"invalid collection name {name!r}: use letters, digits, '_', '-' and '.' (not leading)"
        )
