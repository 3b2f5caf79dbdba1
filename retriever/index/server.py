"""A Qdrant server through ``qdrant_client`` (``url=":memory:"``: in-process local mode, for tests).

``qdrant_client`` is imported when a client is made, so importing this module stays cheap for the CLI.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from spanqa.errors import first_line, redact_url
from spanqa.retriever.index.base import (
    INDEXED_PAYLOAD_FIELDS,
    LEXICAL_VECTOR,
    MAX_BATCH_POINTS,
    MAX_BATCH_QUERIES,
    QUANTIZED_EF_CONSTRUCT,
    QUANTIZED_HNSW_EF,
    QUANTIZED_HNSW_M,
    QUANTIZED_OVERSAMPLING,
    SCROLL_PAGE,
    ClosingIndex,
    IndexPoint,
    IndexStats,
    SearchFilter,
    SearchHit,
    VectorIndexError,
    VectorIndexUnavailableError,
    check_dimension,
    check_quantization,
    normalize_id,
    prepare_points,
    ranked_hits,
    request_batches,
    slices,
    to_floats,
)
from spanqa.retriever.lexical import SparseVector

logger = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_ATTEMPTS = 4
RETRY_BASE_DELAY_S = 0.5

# qdrant_client / httpx / grpc exceptions that mean "no answer from the server".
_CONNECTION_ERROR_NAMES = frozenset(
    {
        "ResponseHandlingException",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TimeoutException",
        "RpcError",
    }
)


class ServerVectorIndex(ClosingIndex):
    """A Qdrant server through ``qdrant_client`` (``url=":memory:"``: in-process local mode, for tests)."""

    def __init__(
        self, url: str, *, api_key: str | None = None, timeout: float = 30.0, quantization: str = "none"
    ) -> None:
        """Create the client (no request is made yet).

        Args:
            url: Server URL such as ``http://localhost:6333``, or ``:memory:``.
            api_key: Optional API key (never logged).
            timeout: Request timeout in seconds.
            quantization: how collections created from now on keep their vectors (``VECTOR_QUANTIZATIONS``).
        """
        from qdrant_client import QdrantClient, models

        check_quantization(quantization)
        self.quantization = quantization
        self._models: Any = models
        self._lexical: dict[str, bool] = {}
        self._local = url == ":memory:"
        self._display_url = redact_url(url)
        self._dimensions: dict[str, int] = {}
        try:
            if self._local:
                self._client: Any = QdrantClient(location=":memory:")
            else:
                self._client = QdrantClient(
                    url=url,
                    api_key=api_key,
                    timeout=max(1, math.ceil(timeout)),
                    check_compatibility=False,
                )
        except Exception as exc:
            raise VectorIndexError(
                f"cannot create a Qdrant client for {self._display_url}: {first_line(exc)}"
            ) from None
        logger.debug("using Qdrant at %s", self._display_url)

    # -- helpers ------------------------------------------------------------------------------------------

    def _vector_config(self, dimension: int) -> dict[str, Any]:
        """``create_collection``'s vector arguments (dense and BM25) for this store's ``quantization``."""
        m = self._models
        if self.quantization == "none":
            return {
                "vectors_config": m.VectorParams(size=dimension, distance=m.Distance.COSINE),
                "sparse_vectors_config": {LEXICAL_VECTOR: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            }
        # As the embedded store: an int8 copy in memory for the search, float32 vectors on disk to rescore,
        # the BM25 index on disk.
        sparse = m.SparseVectorParams(modifier=m.Modifier.IDF, index=m.SparseIndexParams(on_disk=True))
        return {
            "vectors_config": m.VectorParams(size=dimension, distance=m.Distance.COSINE, on_disk=True),
            "sparse_vectors_config": {LEXICAL_VECTOR: sparse},
            "quantization_config": m.ScalarQuantization(
                scalar=m.ScalarQuantizationConfig(type=m.ScalarType.INT8, quantile=0.99, always_ram=True)
            ),
            "hnsw_config": m.HnswConfigDiff(m=QUANTIZED_HNSW_M, ef_construct=QUANTIZED_EF_CONSTRUCT),
        }

    def _dense_params(self) -> dict[str, Any]:
        """``query_points``' search parameters for a dense query (int8 layout: as the embedded store's)."""
        if self.quantization == "none":
            return {}
        m = self._models
        rescore = m.QuantizationSearchParams(rescore=True, oversampling=QUANTIZED_OVERSAMPLING)
        return {"search_params": m.SearchParams(hnsw_ef=QUANTIZED_HNSW_EF, quantization=rescore)}

    def _is_not_found(self, exc: BaseException) -> bool:
        """Whether ``exc`` says that a collection does not exist."""
        status = getattr(exc, "status_code", None)
        if status == 404:
            return True
        return self._local and isinstance(exc, ValueError) and "not found" in str(exc).lower()

    def _call(self, action: str, name: str | None, fn: Callable[[], T]) -> T:
        """Run one client call, retrying lost connections and 5xx/429 answers with backoff; errors become
        one-line VectorIndexErrors (VectorIndexUnavailableError when the server could not be reached)."""
        for attempt in range(RETRY_ATTEMPTS):
            try:
                return fn()
            except VectorIndexError:
                raise
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                unreachable = status is None and (
                    isinstance(exc, OSError) or type(exc).__name__ in _CONNECTION_ERROR_NAMES
                )
                transient = unreachable or (isinstance(status, int) and (status >= 500 or status == 429))
                if transient and attempt + 1 < RETRY_ATTEMPTS:
                    time.sleep(RETRY_BASE_DELAY_S * 2**attempt)
                    continue
                raise self._error(action, name, exc, unreachable=unreachable, transient=transient) from None
        raise AssertionError("unreachable")

    def _error(
        self, action: str, name: str | None, exc: BaseException, *, unreachable: bool, transient: bool
    ) -> VectorIndexError:
        if name is not None and self._is_not_found(exc):
            self._dimensions.pop(name, None)
            return VectorIndexError(
                f"collection {name!r} does not exist on the Qdrant server at {self._display_url}"
            )
        if unreachable:
            return VectorIndexUnavailableError(
                f"cannot reach the Qdrant server at {self._display_url}: {first_line(exc, 200)}"
            )
        where = f"collection {name!r} on " if name is not None else ""
        status = getattr(exc, "status_code", None)
        detail = f"HTTP {status}" if status is not None else type(exc).__name__
        content = getattr(exc, "content", None)
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(exc)
        kind = VectorIndexUnavailableError if transient else VectorIndexError
        return kind(
            f"Qdrant request failed ({action} {where}{self._display_url}, {detail}): {first_line(text, 240)}"
        )

    def _dimension(self, name: str) -> int:
        """The vector size of collection ``name`` (cached); raise VectorIndexError if it is missing."""
        cached = self._dimensions.get(name)
        if cached is not None:
            return cached
        info = self._call("read", name, lambda: self._client.get_collection(name))
        size, _ = self._vector_params(name, info)
        self._dimensions[name] = size
        return size

    def _vector_params(self, name: str, info: Any) -> tuple[int, Any]:
        """(size, distance) of a collection's single unnamed dense vector."""
        vectors = info.config.params.vectors
        if isinstance(vectors, dict):
            if "" not in vectors:
                raise VectorIndexError(
                    f"collection {name!r} uses named vectors, which spanqa does not support"
                )
            vectors = vectors[""]
        return int(vectors.size), vectors.distance

    def _ensure_payload_indexes(self, name: str, existing: set[str]) -> None:
        """Create the missing keyword payload indexes (no-op in local mode, where they have no effect)."""
        if self._local:
            return
        for field in INDEXED_PAYLOAD_FIELDS:
            if field not in existing:
                create = partial(
                    self._client.create_payload_index,
                    name,
                    field,
                    field_schema=self._models.PayloadSchemaType.KEYWORD,
                    wait=True,
                )
                self._call("create a payload index in", name, create)

    def _filter(self, search_filter: SearchFilter | None) -> Any:
        """A filter for a SearchFilter (None when it restricts nothing)."""
        conditions = search_filter.conditions() if search_filter is not None else []
        if not conditions:
            return None
        m = self._models
        return m.Filter(
            must=[m.FieldCondition(key=key, match=m.MatchAny(any=values)) for key, values in conditions]
        )

    # -- VectorIndex --------------------------------------------------------------------------------------

    def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` (cosine, payload indexes) unless it exists with this dimension."""
        if dimension <= 0:
            raise ValueError(f"dimension must be positive, got {dimension}")
        m = self._models
        if not self.has_collection(name):
            try:
                self._call(
                    "create",
                    name,
                    lambda: self._client.create_collection(
                        name,
                        **self._vector_config(dimension),
                    ),
                )
            except VectorIndexError:
                if not self.has_collection(name):  # else: created concurrently; check it below
                    raise
            else:
                self._ensure_payload_indexes(name, set())
                self._dimensions[name] = dimension
                logger.info("created collection %s (%d-d, cosine) on %s", name, dimension, self._display_url)
                return
        info = self._call("read", name, lambda: self._client.get_collection(name))
        size, distance = self._vector_params(name, info)
        if size != dimension:
            raise VectorIndexError(
                f"dimension mismatch: collection {name!r} holds {size}-d vectors, not {dimension}-d"
            )
        if distance != m.Distance.COSINE:
            raise VectorIndexError(f"collection {name!r} uses {distance} distance, not cosine")
        self._dimensions[name] = size
        self._ensure_payload_indexes(name, set(info.payload_schema or {}))
        if LEXICAL_VECTOR not in (info.config.params.sparse_vectors or {}):
            # Made before lexical retrieval: add the sparse vector where the server allows it, else such a
            # collection keeps working dense-only until `spanqa reindex` makes a new one.
            sparse = {LEXICAL_VECTOR: m.SparseVectorParams(modifier=m.Modifier.IDF)}
            try:
                self._call(
                    "add lexical vectors to",
                    name,
                    lambda: self._client.update_collection(name, sparse_vectors_config=sparse),
                )
            except VectorIndexError as exc:
                logger.warning("collection %s stays without lexical vectors: %s", name, exc)
            self._lexical.pop(name, None)

    def has_collection(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        return bool(self._call("look up", name, lambda: self._client.collection_exists(name)))

    def list_collections(self) -> list[str]:
        """All collections on the server, sorted."""
        response = self._call("list collections on", None, self._client.get_collections)
        return sorted(collection.name for collection in response.collections)

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` in one atomic alias update on the server."""
        from qdrant_client import models

        operations: list[Any] = []
        if self.alias_target(alias) is not None:
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        operations.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=collection, alias_name=alias)
            )
        )
        self._call(
            "alias",
            collection,
            lambda: self._client.update_collection_aliases(change_aliases_operations=operations),
        )

    def alias_target(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or None."""
        response = self._call("list aliases on", None, self._client.get_aliases)
        return next((a.collection_name for a in response.aliases if a.alias_name == alias), None)

    def drop_collection(self, name: str) -> None:
        """Delete collection ``name``; no error if it does not exist."""
        self._dimensions.pop(name, None)
        self._lexical.pop(name, None)
        try:
            self._call("drop", name, lambda: self._client.delete_collection(name))
        except VectorIndexError:
            if self.has_collection(name):
                raise

    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (by id) in batches under ~4 MB; they are searchable when this returns."""
        prepared, sizes = prepare_points(name, points, self._dimension(name))
        m = self._models
        lexical = self.has_lexical(name)
        for batch in request_batches(prepared, sizes):
            structs = [
                m.PointStruct(
                    id=point_id,
                    vector={
                        "": vector,
                        LEXICAL_VECTOR: m.SparseVector(indices=sparse.indices, values=sparse.values),
                    }
                    if sparse is not None and lexical
                    else vector,
                    payload=payload,
                )
                for point_id, vector, payload, sparse in batch
            ]
            self._call("upsert into", name, partial(self._client.upsert, name, structs, wait=True))

    def delete_points(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are ignored)."""
        normalized = sorted({normalize_id(point_id) for point_id in ids})
        self._dimension(name)  # a missing collection is an error, as with Edge
        m = self._models
        for batch in slices(normalized, MAX_BATCH_POINTS):
            selector = m.PointIdsList(points=batch)
            self._call(
                "delete from", name, partial(self._client.delete, name, points_selector=selector, wait=True)
            )

    def delete_document(self, name: str, document_id: str) -> None:
        """Delete every point whose payload ``document_id`` is ``document_id``."""
        self._dimension(name)
        selector = self._models.FilterSelector(filter=self._filter(SearchFilter.of_document(document_id)))
        self._call(
            "delete from", name, lambda: self._client.delete(name, points_selector=selector, wait=True)
        )

    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points nearest to ``vector`` (cosine), best first."""
        query = to_floats(vector)
        check_dimension(name, query, self._dimension(name), "query vector")
        if limit <= 0 or (filter is not None and filter.matches_nothing()):
            return []
        return ranked_hits(self._query(name, filter, query=query, limit=limit, **self._dense_params()))

    def search_many(
        self, name: str, vectors: Sequence[Sequence[float]], *, limit: int = 1
    ) -> list[list[SearchHit]]:
        """For each vector, the ``limit`` points nearest to it (cosine), best first, in batched requests."""
        queries = [to_floats(vector) for vector in vectors]
        dimension = self._dimension(name)
        for query in queries:
            check_dimension(name, query, dimension, "query vector")
        if limit <= 0 or not queries:
            return [[] for _ in queries]
        m = self._models
        out: list[list[SearchHit]] = []
        params = self._dense_params().get("search_params")
        for batch in slices(queries, MAX_BATCH_QUERIES):
            requests = [
                m.QueryRequest(query=query, limit=limit, with_payload=True, params=params) for query in batch
            ]
            search = partial(self._client.query_batch_points, name, requests=requests)
            out.extend(ranked_hits(response.points) for response in self._call("search", name, search))
        return out

    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points whose BM25 score for the query's terms is highest, best first."""
        if limit <= 0 or not query.indices or (filter is not None and filter.matches_nothing()):
            return []
        if not self.has_lexical(name):
            return []
        sparse = self._models.SparseVector(indices=list(query.indices), values=list(query.values))
        points = self._query(name, filter, query=sparse, using=LEXICAL_VECTOR, limit=limit)
        return ranked_hits(points, positive_only=True)

    def _query(self, name: str, filter: SearchFilter | None, **query: Any) -> list[Any]:
        """Scored points of ``query_points`` with payloads, without vectors."""
        query_filter = self._filter(filter)
        search = partial(
            self._client.query_points,
            name,
            query_filter=query_filter,
            with_payload=True,
            with_vectors=False,
            **query,
        )
        return list(self._call("search", name, search).points)

    def has_lexical(self, name: str) -> bool:
        """Whether the collection holds BM25 term weights (one made before lexical retrieval may not)."""
        cached = self._lexical.get(name)
        if cached is None:
            info = self._call("read", name, lambda: self._client.get_collection(name))
            cached = LEXICAL_VECTOR in (info.config.params.sparse_vectors or {})
            self._lexical[name] = cached
        return cached

    def count(self, name: str, *, document_id: str | None = None) -> int:
        """The exact number of points, optionally of one document."""
        count_filter = self._filter(SearchFilter.of_document(document_id))
        response = self._call(
            "count points in", name, lambda: self._client.count(name, count_filter=count_filter, exact=True)
        )
        return int(response.count)

    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]:
        """Every point id, optionally of one document (scrolls the whole collection)."""
        scroll_filter = self._filter(SearchFilter.of_document(document_id))
        ids: set[str] = set()
        offset: Any = None
        while True:
            scroll = partial(
                self._client.scroll,
                name,
                scroll_filter=scroll_filter,
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            records, offset = self._call("scroll", name, scroll)
            ids.update(str(record.id) for record in records)
            if offset is None or not records:
                return ids

    def stats(self, name: str) -> IndexStats:
        """Points, HNSW-indexed vectors and segments of collection ``name`` (the server's collection info)."""
        info = self._call("read", name, lambda: self._client.get_collection(name))
        return IndexStats(
            int(info.points_count or 0), int(info.indexed_vectors_count or 0), int(info.segments_count or 0)
        )

    def build_search_index(self, name: str) -> bool:
        """Nothing to do: a server indexes as points arrive (its optimizers run in the background)."""
        return False

    def release(self) -> None:
        """Nothing to give back: a server is shared by every process."""

    def lend_when_asked(self) -> None:
        """Nothing to lend: a server is shared by every process."""

    def close(self) -> None:
        """Close the client; safe to call twice."""
        with contextlib.suppress(Exception):
            self._client.close()

    def __repr__(self) -> str:
        return f"ServerVectorIndex({self._display_url!r})"
