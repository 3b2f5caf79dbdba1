"""The embedded store: Qdrant Edge, one shard directory per collection, one process at a time.

``qdrant_edge`` is imported when a store opens, so importing this module stays cheap for the CLI.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from spanqa.errors import first_line
from spanqa.retriever.index.base import (
    INDEXED_PAYLOAD_FIELDS,
    LEXICAL_VECTOR,
    MAX_BATCH_POINTS,
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
    VectorIndexInUseError,
    check_collection_name,
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

#: How many candidates the HNSW graph walk keeps (Qdrant's ``hnsw_ef``): 128 brings dense recall@10 against
#: exact search to the scale goal (bench/scale.py; the graph's default missed it), for a fraction of a ms.
HNSW_EF = 128
#: Qdrant's own default: below this many KB of vectors a segment is searched exhaustively.
EDGE_FULL_SCAN_KB = 10_000
#: A process that waits for the store says so after this many seconds, and tries again this often.
WAIT_NOTICE_S, WAIT_POLL_S = 1.0, 0.1
#: Lock file that makes an Edge store single-process; it lives in the store directory.
EDGE_LOCK_FILE = ".spanqa-index.lock"
#: A process that waits for the store keeps a file named so (then its pid) in the store directory, touched
#: as it waits: a process that lends the store (``lend_when_asked``) gives it back when it sees one fresher
#: than ``WAITING_FRESH_S`` (older: left by a process that died waiting).
WAITING_PREFIX, WAITING_FRESH_S = ".spanqa-waiting-", 5.0
#: The file Qdrant Edge writes into every shard directory; its presence means "collection exists".
EDGE_CONFIG_FILE = "edge_config.json"
#: Where the store keeps its aliases (Edge has none of its own).
EDGE_ALIASES_FILE = "aliases.json"
#: Beside each collection: how many writes it has had (a graph built on a copy replaces it only when none
#: came meanwhile), and where a build keeps its copy and the replaced original (leading dots: never names of
#: collections).
WRITES_PREFIX, BUILD_PREFIX, OLD_PREFIX = ".writes-", ".build-", ".old-"


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_turn(
    method: Callable[Concatenate[EdgeVectorIndex, _P], _R],
) -> Callable[Concatenate[EdgeVectorIndex, _P], _R]:
    """Run ``method`` holding the index's mutex while the store is lent on request: the lending thread then
    never closes a shard in use (otherwise calls run as they come, as a server's threads need)."""

    @functools.wraps(method)
    def held(self: EdgeVectorIndex, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._lender is None:
            return method(self, *args, **kwargs)
        with self._mutex:
            return method(self, *args, **kwargs)

    return held


def return_freed_memory() -> None:
    """Give the heap pages that a closed collection freed back to the system. glibc's malloc keeps them for
    reuse (much of what a big collection held: docs/history, round 14), and a big ingest closes its
    collection so that a child process can build the graph over a copy: the two together must fit
    (bench/stream_ingest.py --memory-limit). Nothing to do off glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class EdgeVectorIndex(ClosingIndex):
    """Embedded Qdrant Edge store: one shard directory per collection under ``path``.

    Only one process may open a store at a time: the constructor takes an exclusive, non-blocking
    ``flock`` on ``<path>/.spanqa-index.lock`` (held until ``close()``) and raises VectorIndexError at once
    if another process (or another open index in this process) holds it. Use as a context manager or call
    ``close()``; open the index after forking, never before.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        wait_s: float = 0.0,
        rewait_s: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        quantization: str = "none",
    ) -> None:
        """Open (creating if needed) the store directory and lock it.

        Args:
            path: The store directory.
            wait_s: how long to wait for another process that holds the store (0: fail at once).
            rewait_s: how long to wait when taking the store again after ``release()`` (default: wait_s).
            on_wait: told, once, when the wait has lasted ``WAIT_NOTICE_S`` (what to show the user).
            quantization: how collections created from now on keep their vectors (``VECTOR_QUANTIZATIONS``).
        """
        import qdrant_edge

        check_quantization(quantization)
        self.quantization = quantization

        self._q: Any = qdrant_edge
        self.path = Path(path).expanduser()
        self._shards: dict[str, Any] = {}
        self._dimensions: dict[str, int] = {}
        self._configs: dict[str, dict[str, Any]] = {}  # per collection: its edge_config.json, read once
        self._mutex = threading.RLock()
        self._lock_fd: int | None = None
        self._closed = False
        self._lender: threading.Thread | None = None
        self._lending_stopped = threading.Event()
        self.on_wait = on_wait
        self.rewait_s = wait_s if rewait_s is None else rewait_s
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VectorIndexError(
                f"cannot create the vector store directory {self.path}: {exc.strerror or exc}"
            ) from exc
        self._lock_fd = self._acquire_lock(wait_s)
        self._finish_interrupted_swaps()
        logger.debug("opened Qdrant Edge store at %s", self.path)

    # -- locking ------------------------------------------------------------------------------------------

    def _in_use_error(self, holder: str = "") -> VectorIndexInUseError:
        """The error for a store that another process holds."""
        return VectorIndexInUseError(
            f"the vector store at {self.path} is in use by another spanqa process{holder}; "
            "only one process can open it at a time: wait for that process to finish or stop it "
            "(or run a Qdrant server and set SPANQA_QDRANT_URL to share the index)"
        )

    def _acquire_lock(self, wait_s: float) -> int:
        """Take the exclusive store lock, waiting up to ``wait_s`` for a process that holds it (saying so
        through ``on_wait`` after ``WAIT_NOTICE_S``); raise VectorIndexInUseError when it is still held."""
        started = time.monotonic()
        told = False
        marker = self.path / self._waiting_name
        try:
            while True:
                try:
                    return self._try_lock()
                except VectorIndexInUseError as exc:
                    waited = time.monotonic() - started
                    if waited >= wait_s:
                        if wait_s > 0:
                            waited_note = f" (waited {wait_s:g} s: store_wait_s)"
                            raise VectorIndexInUseError(f"{exc}{waited_note}") from None
                        raise
                    # Say that this process waits: a holder that lends the store gives it back at once.
                    with contextlib.suppress(OSError):
                        marker.touch()
                    if not told and waited >= WAIT_NOTICE_S and self.on_wait is not None:
                        self.on_wait(
                            f"waiting for the spanqa process that holds {self.path} (at most {wait_s:g} s)"
                        )
                        told = True
                    time.sleep(WAIT_POLL_S)
        finally:
            with contextlib.suppress(OSError):
                marker.unlink(missing_ok=True)

    def _try_lock(self) -> int:
        """Take the exclusive store lock without blocking; raise VectorIndexError if it is held."""
        import fcntl

        lock_path = self.path / EDGE_LOCK_FILE
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise VectorIndexError(f"cannot open the lock file {lock_path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                pid = int(os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "0")
                holder = f" (pid {pid})" if pid > 0 else ""
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise self._in_use_error(holder) from None
            raise VectorIndexError(
                f"cannot lock the vector store at {self.path}: {exc.strerror or exc}"
            ) from exc
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return fd

    def _release_lock(self) -> None:
        """Release the store lock (closing the descriptor releases the flock)."""
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    # -- shard management ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Raise VectorIndexError if close() was called; take the store again after ``release()``."""
        if self._closed:
            raise VectorIndexError(f"the vector store at {self.path} has been closed")
        if self._lock_fd is None:
            with self._mutex:
                if self._lock_fd is None:
                    self._lock_fd = self._acquire_lock(self.rewait_s)

    def _collection_dir(self, name: str) -> Path:
        """The shard directory of collection ``name``."""
        check_collection_name(name)
        return self.path / name

    def _edge_error(self, exc: BaseException, name: str, action: str) -> VectorIndexError:
        """Map an exception from qdrant_edge to a one-line VectorIndexError."""
        message = str(exc)
        if "WouldBlock" in message or "Resource temporarily unavailable" in message:
            return self._in_use_error()
        if "dimension error" in message.lower():
            return VectorIndexError(f"dimension mismatch in collection {name!r}: {first_line(message)}")
        return VectorIndexError(f"cannot {action} collection {name!r} in {self.path}: {first_line(message)}")

    def _read_dimension(self, directory: Path) -> int | None:
        """The vector size recorded in a shard's edge_config.json, or None if it cannot be read."""
        try:
            config = json.loads((directory / EDGE_CONFIG_FILE).read_text(encoding="utf-8"))
            size = config["vectors"][""]["size"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return size if isinstance(size, int) else None

    def _ensure_payload_indexes(self, shard: Any) -> None:
        """Create the keyword payload indexes a shard lacks."""
        q = self._q
        existing = set(shard.info().payload_schema)
        for field in INDEXED_PAYLOAD_FIELDS:
            if field not in existing:
                shard.update(q.UpdateOperation.create_field_index(field, q.PayloadSchemaType.Keyword))

    def _shard(self, name: str) -> Any:
        """The open shard of collection ``name``, loading it on first use."""
        self._check_open()
        with self._mutex:
            shard = self._shards.get(name)
            if shard is not None:
                return shard
            directory = self._collection_dir(name)
            if not (directory / EDGE_CONFIG_FILE).is_file():
                raise VectorIndexError(
                    f"collection {name!r} does not exist in the vector store at {self.path}"
                )
            try:
                shard = self._q.EdgeShard.load(str(directory))
            except Exception as exc:
                raise self._edge_error(exc, name, "open") from None
            self._shards[name] = shard
            dimension = self._read_dimension(directory)
            if dimension is not None:
                self._dimensions[name] = dimension
            return shard

    # -- VectorIndex --------------------------------------------------------------------------------------

    @_in_turn
    def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` (cosine, payload indexes) unless it exists with this dimension."""
        self._check_open()
        if dimension <= 0:
            raise ValueError(f"dimension must be positive, got {dimension}")
        q = self._q
        with self._mutex:
            directory = self._collection_dir(name)
            if name in self._shards or (directory / EDGE_CONFIG_FILE).is_file():
                existing = self._dimensions.get(name) or self._read_dimension(directory)
                if existing is not None and existing != dimension:
                    raise VectorIndexError(
                        f"dimension mismatch: collection {name!r} holds {existing}-d vectors, "
                        f"not {dimension}-d"
                    )
                shard = self._shard(name)
                if existing is None:
                    self._dimensions[name] = dimension
                try:
                    self._ensure_payload_indexes(shard)
                    if not self.has_lexical(name):
                        # Made before lexical retrieval: points re-ingested from now on get their terms.
                        shard.update(
                            q.UpdateOperation.create_sparse_vector(LEXICAL_VECTOR, modifier=q.Modifier.Idf)
                        )
                        self._configs.pop(name, None)
                except Exception as exc:
                    raise self._edge_error(exc, name, "index") from None
                return
            if directory.exists():
                # Without edge_config.json and segment data it is the leftover of an interrupted create.
                segments = directory / "segments"
                if segments.is_dir() and any(segments.iterdir()):
                    raise VectorIndexError(
                        f"collection directory {directory} holds segment data but no {EDGE_CONFIG_FILE}; "
                        "move it away or drop the collection"
                    )
                logger.warning("removing incomplete collection directory %s", directory)
                shutil.rmtree(directory)
            config = q.EdgeConfig(
                vectors=self._vector_params(dimension),
                sparse_vectors={LEXICAL_VECTOR: self._sparse_params()},
                # Keep every upserted point searchable at once, whatever the segment size.
                optimizers=q.EdgeOptimizersConfig(prevent_unoptimized=False),
            )
            try:
                shard = q.EdgeShard.create(str(directory), config)
                self._ensure_payload_indexes(shard)
                shard.flush()
            except Exception as exc:
                raise self._edge_error(exc, name, "create") from None
            self._shards[name] = shard
            self._dimensions[name] = dimension
            logger.info("created collection %s (%d-d, cosine) in %s", name, dimension, self.path)

    def _vector_params(self, dimension: int) -> Any:
        q = self._q
        if self.quantization == "none":
            return q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine)
        # The graph walk reads the int8 copy (pinned in memory); the float32 vectors stay in their file, not
        # read ahead ("cold"): only the best candidates' pages are read, to rescore them.
        return q.EdgeVectorParams(
            size=dimension,
            distance=q.Distance.Cosine,
            memory=q.Memory.Cold,
            quantization_config=q.ScalarQuantizationConfig(
                type=q.ScalarType.Int8, quantile=0.99, memory=q.Memory.Pinned
            ),
            hnsw_config=q.HnswIndexConfig(
                m=QUANTIZED_HNSW_M, ef_construct=QUANTIZED_EF_CONSTRUCT, full_scan_threshold=EDGE_FULL_SCAN_KB
            ),
        )

    def _sparse_params(self) -> Any:
        q = self._q
        if self.quantization == "none":
            return q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)
        # A big store's BM25 index stays in its files (read through the page cache): 300 MB less memory at a
        # million passages, lexical search as fast once its pages are read (bench/stream_ingest.py).
        return q.EdgeSparseVectorParams(modifier=q.Modifier.Idf, memory=q.Memory.Cold)

    def has_collection(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        self._check_open()
        return name in self._shards or (self._collection_dir(name) / EDGE_CONFIG_FILE).is_file()

    @_in_turn
    def list_collections(self) -> list[str]:
        """All collections in the store, sorted."""
        self._check_open()
        return sorted(
            entry.name
            for entry in self.path.iterdir()
            if entry.is_dir() and not entry.name.startswith(".") and (entry / EDGE_CONFIG_FILE).is_file()
        )

    @_in_turn
    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` (kept in a small JSON file, replaced atomically)."""
        self._check_open()
        if not self.has_collection(collection):
            raise VectorIndexError(f"collection '{collection}' does not exist in {self.path}")
        aliases = self._read_aliases()
        aliases[alias] = collection
        partial = self.path / (EDGE_ALIASES_FILE + ".partial")
        partial.write_text(json.dumps(aliases, indent=1, sort_keys=True), encoding="utf-8")
        partial.replace(self.path / EDGE_ALIASES_FILE)

    @_in_turn
    def alias_target(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or None."""
        self._check_open()
        return self._read_aliases().get(alias)

    def _read_aliases(self) -> dict[str, str]:
        path = self.path / EDGE_ALIASES_FILE
        if not path.is_file():
            return {}
        data: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
        return data

    @_in_turn
    def drop_collection(self, name: str) -> None:
        """Delete collection ``name`` and its files; no error if it does not exist."""
        self._check_open()
        with self._mutex:
            directory = self._collection_dir(name)
            shard = self._shards.pop(name, None)
            self._configs.pop(name, None)
            self._dimensions.pop(name, None)
            if shard is not None:
                with contextlib.suppress(Exception):
                    shard.close()
            self._note_write(name)
            if directory.exists():
                shutil.rmtree(directory)
                logger.info("dropped collection %s from %s", name, self.path)

    @_in_turn
    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (by id); they are searchable when this returns."""
        shard = self._shard(name)
        self._note_write(name)
        prepared, sizes = prepare_points(name, points, self._dimensions.get(name))
        q = self._q
        for batch in request_batches(prepared, sizes):
            operation = q.UpdateOperation.upsert_points(
                [
                    q.Point(
                        point_id,
                        {"": vector, LEXICAL_VECTOR: q.SparseVector(sparse.indices, sparse.values)}
                        if sparse is not None
                        else vector,
                        payload,
                    )
                    for point_id, vector, payload, sparse in batch
                ]
            )
            try:
                shard.update(operation)
            except Exception as exc:
                raise self._edge_error(exc, name, "upsert into") from None

    @_in_turn
    def delete_points(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are ignored)."""
        shard = self._shard(name)
        self._note_write(name)
        normalized = sorted({normalize_id(point_id) for point_id in ids})
        for batch in slices(normalized, MAX_BATCH_POINTS):
            try:
                shard.update(self._q.UpdateOperation.delete_points(batch))
            except Exception as exc:
                raise self._edge_error(exc, name, "delete from") from None

    @_in_turn
    def delete_document(self, name: str, document_id: str) -> None:
        """Delete every point whose payload ``document_id`` is ``document_id``."""
        shard = self._shard(name)
        self._note_write(name)
        try:
            shard.update(
                self._q.UpdateOperation.delete_points_by_filter(
                    self._filter(SearchFilter.of_document(document_id))
                )
            )
        except Exception as exc:
            raise self._edge_error(exc, name, "delete from") from None

    @_in_turn
    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points nearest to ``vector`` (cosine), best first."""
        shard = self._shard(name)
        query = to_floats(vector)
        check_dimension(name, query, self._dimensions.get(name), "query vector")
        if limit <= 0 or (filter is not None and filter.matches_nothing()):
            return []
        return ranked_hits(self._query(shard, name, self._q.Query.Nearest(query), filter, limit))

    @_in_turn
    def search_many(
        self, name: str, vectors: Sequence[Sequence[float]], *, limit: int = 1
    ) -> list[list[SearchHit]]:
        """For each vector, the ``limit`` points nearest to it (cosine), best first, in one planned batch."""
        shard = self._shard(name)
        queries = [to_floats(vector) for vector in vectors]
        for query in queries:
            check_dimension(name, query, self._dimensions.get(name), "query vector")
        if limit <= 0 or not queries:
            return [[] for _ in queries]
        q = self._q
        requests = [
            q.QueryRequest(limit=limit, query=q.Query.Nearest(query), with_payload=True, with_vector=False)
            for query in queries
        ]
        try:
            results = shard.query_batch(q.QueryBatchRequest(requests))
        except Exception as exc:
            raise self._edge_error(exc, name, "search") from None
        return [ranked_hits(points) for points in results]

    @_in_turn
    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points whose BM25 score for the query's terms is highest, best first."""
        shard = self._shard(name)
        if limit <= 0 or not query.indices or (filter is not None and filter.matches_nothing()):
            return []
        if not self.has_lexical(name):
            return []
        q = self._q
        nearest = q.Query.Nearest(q.SparseVector(query.indices, query.values), using=LEXICAL_VECTOR)
        return ranked_hits(self._query(shard, name, nearest, filter, limit), positive_only=True)

    def _search_params(self, name: str, limit: int) -> Any:
        q = self._q
        if not self._quantized(name):
            return q.SearchParams(hnsw_ef=max(HNSW_EF, limit))
        rescore = q.QuantizationSearchParams(rescore=True, oversampling=QUANTIZED_OVERSAMPLING)
        return q.SearchParams(hnsw_ef=max(QUANTIZED_HNSW_EF, limit), quantization=rescore)

    def _quantized(self, name: str) -> bool:
        """Whether the collection keeps an int8 copy of its vectors."""
        try:
            config = self._edge_config(name)
            return bool(config["vectors"][""].get("quantization_config") or config.get("quantization_config"))
        except (VectorIndexError, KeyError, TypeError, AttributeError):
            return False

    def _edge_config(self, name: str) -> dict[str, Any]:
        """The collection's edge_config.json, read once (until the collection is changed or closed)."""
        cached = self._configs.get(name)
        if cached is None:
            path = self._collection_dir(name) / EDGE_CONFIG_FILE
            try:
                cached = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                message = f"cannot read the configuration of collection {name!r}: {exc}"
                raise VectorIndexError(message) from None
            if not isinstance(cached, dict):
                raise VectorIndexError(f"cannot read the configuration of collection {name!r}: not an object")
            self._configs[name] = cached
        return cached

    def _query(self, shard: Any, name: str, query: Any, filter: SearchFilter | None, limit: int) -> list[Any]:
        """Scored points of one query with payloads, without vectors."""
        request = self._q.QueryRequest(
            limit=limit,
            query=query,
            filter=self._filter(filter),
            with_payload=True,
            with_vector=False,
            params=self._search_params(name, limit),
        )
        try:
            return list(shard.query(request))
        except Exception as exc:
            raise self._edge_error(exc, name, "search") from None

    @_in_turn
    def has_lexical(self, name: str) -> bool:
        """Whether the collection holds BM25 term weights (one made before lexical retrieval may not)."""
        self._shard(name)
        return LEXICAL_VECTOR in (self._edge_config(name).get("sparse_vectors") or {})

    @_in_turn
    def count(self, name: str, *, document_id: str | None = None) -> int:
        """The exact number of points, optionally of one document."""
        shard = self._shard(name)
        q = self._q
        point_filter = self._filter(SearchFilter.of_document(document_id))
        try:
            return int(shard.count(q.CountRequest(exact=True, filter=point_filter)))
        except Exception as exc:
            raise self._edge_error(exc, name, "count points in") from None

    @_in_turn
    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]:
        """Every point id, optionally of one document (scrolls the whole collection)."""
        shard = self._shard(name)
        q = self._q
        point_filter = self._filter(SearchFilter.of_document(document_id))
        ids: set[str] = set()
        offset: Any = None
        while True:
            request = q.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=point_filter, with_payload=False, with_vector=False
            )
            try:
                records, offset = shard.scroll(request)
            except Exception as exc:
                raise self._edge_error(exc, name, "scroll") from None
            ids.update(str(record.id) for record in records)
            if offset is None or not records:
                return ids

    @_in_turn
    def flush(self) -> None:
        """Write all pending changes of open collections to disk (the WAL already makes them durable)."""
        with self._mutex:
            for name, shard in self._shards.items():
                try:
                    shard.flush()
                except Exception as exc:
                    raise self._edge_error(exc, name, "flush") from None

    @_in_turn
    def stats(self, name: str) -> IndexStats:
        """Points, HNSW-indexed dense vectors and segments of collection ``name`` (Edge's shard info).

        Edge counts the points' BM25 vectors among its indexed vectors (their inverted index is always
        built): those are taken off, leaving the dense vectors in the HNSW graph.
        """
        shard = self._shard(name)
        try:
            info = shard.info()
        except Exception as exc:
            raise self._edge_error(exc, name, "read") from None
        points, indexed = int(info.points_count), int(info.indexed_vectors_count)
        if self.has_lexical(name):
            q = self._q
            with_terms = q.Filter(must=[q.HasVectorCondition(LEXICAL_VECTOR)])
            try:
                indexed -= int(shard.count(q.CountRequest(exact=True, filter=with_terms)))
            except Exception as exc:
                raise self._edge_error(exc, name, "count points in") from None
        return IndexStats(points, min(max(indexed, 0), points), int(info.segments_count))

    def build_search_index(self, name: str) -> bool:
        """Build the HNSW graph without keeping anyone waiting: on a copy of the collection, in a child
        process, with the store free meanwhile (Edge's ``optimize`` holds the GIL and the shard for as long as
        it runs: a minute at 200,000 vectors). The store is held only to copy the collection (seconds) and
        to put the copy in its place; writes that came meanwhile win: the copy is dropped, and the next
        ingest builds again.

        Returns:
            True when the built copy replaced the collection, False when Edge found nothing to build.

        Raises:
            VectorIndexError: the copy or the build failed, or the collection was written meanwhile (it is
                left as it was).
        """
        # Looked up at each call: tests stand in for the child process.
        from spanqa.retriever.index.edge_optimize import optimize_in_child

        with self._mutex:
            self._shard(name)  # exists, and the store is ours
            self.flush()
            writes = self._writes(name)
            self._clear_builds(name)
            build = self.path / f"{BUILD_PREFIX}{name}-{os.getpid()}"
            self._close_shard(name)  # copied closed: an open shard may still write its files
            try:
                shutil.copytree(self._collection_dir(name), build)
            except OSError as exc:
                shutil.rmtree(build, ignore_errors=True)
                raise VectorIndexError(
                    f"cannot copy collection {name!r} to build its search index: {exc.strerror or exc}"
                ) from exc
            self.release()
        try:
            built = optimize_in_child(build)
        except (OSError, RuntimeError) as exc:
            shutil.rmtree(build, ignore_errors=True)
            raise VectorIndexError(f"cannot build the search index of {name!r}: {first_line(exc)}") from exc
        with self._mutex:
            try:
                self._check_open()
            except VectorIndexError:
                shutil.rmtree(build, ignore_errors=True)
                raise
            if not built or self._writes(name) != writes or not self.has_collection(name):
                shutil.rmtree(build, ignore_errors=True)
                if built:
                    raise VectorIndexError(
                        f"collection {name!r} was written while its graph was built: the copy was dropped "
                        "(the next ingest builds it again)"
                    )
                return False
            self._close_shard(name)
            old = self.path / f"{OLD_PREFIX}{name}"
            shutil.rmtree(old, ignore_errors=True)
            # Two renames: one interrupted between them is put right by the next open.
            os.rename(self._collection_dir(name), old)
            os.rename(build, self._collection_dir(name))
            shutil.rmtree(old, ignore_errors=True)
        return True

    @_in_turn
    def optimize(self, name: str) -> bool:
        """Run Edge's segment optimizers (HNSW build, vacuum) in this process, blocking; CPU-heavy.

        Not needed for correctness: unoptimized segments are searched exhaustively (exact). Worth it only
        after a large ingest, and only when searches get slow.

        Args:
            name: Collection name.

        Returns:
            True if any segment was optimized.
        """
        shard = self._shard(name)
        try:
            return bool(shard.optimize())
        except Exception as exc:
            raise self._edge_error(exc, name, "optimize") from None

    def _close_shard(self, name: str) -> None:
        """Flush and close collection ``name`` if it is open (it loads again at its next use)."""
        shard = self._shards.pop(name, None)
        self._configs.pop(name, None)
        if shard is not None:
            with contextlib.suppress(Exception):
                shard.flush()
            with contextlib.suppress(Exception):
                shard.close()
            del shard
            return_freed_memory()

    def _writes(self, name: str) -> int:
        """How many writes collection ``name`` has had (as ``_note_write`` counts them)."""
        try:
            return int((self.path / f"{WRITES_PREFIX}{name}").read_text(encoding="ascii") or 0)
        except (OSError, ValueError):
            return 0

    def _note_write(self, name: str) -> None:
        """Count a write to ``name`` before it is made (a build that copied it before then is stale)."""
        with contextlib.suppress(OSError):
            (self.path / f"{WRITES_PREFIX}{name}").write_text(str(self._writes(name) + 1), encoding="ascii")

    def _clear_builds(self, name: str) -> None:
        """Remove copies left by builds of ``name`` whose process is gone."""
        for entry in self.path.glob(f"{BUILD_PREFIX}{name}-*"):
            pid = entry.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not _process_alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)

    def _finish_interrupted_swaps(self) -> None:
        """Put back a collection whose build was interrupted between its two renames (held lock only)."""
        with contextlib.suppress(OSError):
            for old in self.path.glob(f"{OLD_PREFIX}*"):
                target = self.path / old.name[len(OLD_PREFIX) :]
                if (target / EDGE_CONFIG_FILE).is_file():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    logger.warning("restoring collection %s after an interrupted index build", target.name)
                    shutil.rmtree(target, ignore_errors=True)
                    os.rename(old, target)

    def lend_when_asked(self) -> None:
        """From now until closed, give the store back whenever another process waits for it, between this
        index's own calls (a thread watches for waiting processes); the next call here takes it again,
        waiting. A long ingest keeps its collection open this way, instead of opening it anew after every
        batch (which takes longer the bigger the collection: about a second at 200,000 points)."""
        with self._mutex:
            if self._lender is not None or self._closed:
                return
            self._lender = threading.Thread(target=self._lend, name="spanqa-store-lender", daemon=True)
        self._lender.start()

    def _lend(self) -> None:
        while not self._lending_stopped.wait(WAIT_POLL_S):
            if self._lock_fd is None or not self._others_waiting():
                continue
            with self._mutex:
                if self._lock_fd is not None and not self._closed:
                    logger.debug("another process waits for the store: giving it back")
                    self.release()

    @property
    def _waiting_name(self) -> str:
        """The name of the file this index keeps in the store directory while it waits for the store."""
        return f"{WAITING_PREFIX}{os.getpid()}-{id(self)}"

    def _others_waiting(self) -> bool:
        """Whether another process (or another index in this one) waits for the store now."""
        mine = self._waiting_name
        now = time.time()
        try:
            markers = [p for p in self.path.iterdir() if p.name.startswith(WAITING_PREFIX) and p.name != mine]
        except OSError:
            return False
        for marker in markers:
            try:
                fresh = now - marker.stat().st_mtime <= WAITING_FRESH_S
            except OSError:
                continue
            if fresh:
                return True
            with contextlib.suppress(OSError):
                marker.unlink()  # left by a process that died waiting
        return False

    def release(self) -> None:
        """Flush and close every open collection and give the store lock back, so that another process can
        use the store; the next call here takes it again (waiting up to ``wait_s``)."""
        with self._mutex:
            for name, shard in list(self._shards.items()):
                try:
                    shard.flush()
                except Exception:
                    logger.exception("flushing collection %s failed", name)
                with contextlib.suppress(Exception):
                    shard.close()
            self._shards.clear()
            self._configs.clear()
            self._dimensions.clear()
            self._release_lock()

    def close(self) -> None:
        """Flush and close every open collection and release the store lock; safe to call twice."""
        self._lending_stopped.set()
        lender = self._lender
        if lender is not None and lender is not threading.current_thread():
            lender.join()
        with self._mutex:
            self.release()
            self._closed = True

    def __repr__(self) -> str:
        return f"EdgeVectorIndex({str(self.path)!r})"

    # -- filters ------------------------------------------------------------------------------------------

    def _filter(self, search_filter: SearchFilter | None) -> Any:
        """An Edge filter for a SearchFilter (None when it restricts nothing)."""
        conditions = search_filter.conditions() if search_filter is not None else []
        if not conditions:
            return None
        q = self._q
        return q.Filter(
            must=[q.FieldCondition(key=key, match=q.MatchAny(values)) for key, values in conditions]
        )


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
