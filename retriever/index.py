"""The vector index behind one Protocol: embedded Qdrant Edge (default) or a Qdrant server.

Points carry chunk ids (UUID strings) and a small payload (document_id, chunk_id, path, ordinal, char_start,
char_end, page); collections use cosine distance and have keyword payload indexes on ``document_id`` and
``path``. ``qdrant_edge`` and ``qdrant_client`` are imported lazily (inside the backends) so that importing
this module stays cheap for the CLI.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from retriever.lexical import SparseVector

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The sparse vector of each point that holds its BM25 term weights (see ``retriever.lexical``).
LEXICAL_VECTOR = "lexical"
#: Payload fields that get a keyword payload index in every collection.
INDEXED_PAYLOAD_FIELDS: tuple[str, ...] = ("document_id", "path")
#: Keep each upsert request under this many (estimated) bytes; servers reject huge bodies.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: And under this many points.
MAX_BATCH_POINTS = 1024
#: Page size for scrolling through point ids.
SCROLL_PAGE = 1024
#: Lock file that makes an Edge store single-process; it lives in the store directory.
EDGE_LOCK_FILE = ".spanqa-index.lock"
#: The file Qdrant Edge writes into every shard directory; its presence means "collection exists".
EDGE_CONFIG_FILE = "edge_config.json"

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
_COLLECTION_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
_SLUG_INVALID_RE = re.compile(r"[^a-z0-9-]+")


class VectorIndexError(RuntimeError):
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
class SearchFilter:
    """Restrict a search to documents and/or paths (``None``: no restriction; ``[]``: matches nothing)."""

    document_ids: Sequence[str] | None = None
    paths: Sequence[str] | None = None

    def matches_nothing(self) -> bool:
        """Whether an empty (not ``None``) list makes this filter exclude every point."""
        return (self.document_ids is not None and len(self.document_ids) == 0) or (
            self.paths is not None and len(self.paths) == 0
        )


@runtime_checkable
class VectorIndex(Protocol):
    """What ingest and search need from a vector store."""

    def ensure_collection(self, name: str, dimension: int) -> None: ...

    def has_collection(self, name: str) -> bool: ...

    def list_collections(self) -> list[str]: ...

    def drop_collection(self, name: str) -> None: ...

    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None: ...

    def delete_points(self, name: str, ids: Sequence[str]) -> None: ...

    def delete_document(self, name: str, document_id: str) -> None: ...

    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]: ...

    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]: ...

    def has_lexical(self, name: str) -> bool: ...

    def count(self, name: str, *, document_id: str | None = None) -> int: ...

    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]: ...

    def set_alias(self, alias: str, collection: str) -> None: ...

    def alias_target(self, alias: str) -> str | None: ...

    def close(self) -> None: ...


RETRY_ATTEMPTS = 4
RETRY_BASE_DELAY_S = 0.5

ACTIVE_ALIAS = "spanqa_active"
"""Points at the collection questions are answered from (the catalog's active index version)."""
EDGE_ALIASES_FILE = "aliases.json"


# ---------------------------------------------------------------------------------------------------------
# Helpers shared by both backends
# ---------------------------------------------------------------------------------------------------------


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


def _one_line(text: object, limit: int = 300) -> str:
    """Collapse ``text`` to one line of at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _normalize_id(point_id: str) -> str:
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


def _to_floats(vector: Sequence[float] | Any) -> list[float]:
    """A plain list of floats from a sequence or a 1-D numpy array."""
    tolist = getattr(vector, "tolist", None)
    values = tolist() if callable(tolist) else list(vector)
    return [float(v) for v in values]


def _check_dimension(name: str, vector: list[float], dimension: int | None, what: str) -> None:
    """Raise VectorIndexError when ``vector`` does not have the collection's dimension."""
    if dimension is not None and len(vector) != dimension:
        raise VectorIndexError(
            f"dimension mismatch: collection {name!r} holds {dimension}-d vectors but the {what} "
            f"has {len(vector)} dimensions (was the retriever model changed?)"
        )


def _estimate_point_bytes(vector: list[float], payload: dict[str, Any]) -> int:
    """A generous estimate of one point's size in a JSON request body."""
    return 24 * len(vector) + len(json.dumps(payload, default=str)) + 128


def _batches(items: list[T], sizes: list[int]) -> Iterator[list[T]]:
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


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    """Fixed-size slices of ``items``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


PreparedPoint = tuple[str, list[float], dict[str, Any], SparseVector | None]


def _prepare_points(
    name: str, points: Sequence[IndexPoint], dimension: int | None
) -> tuple[list[PreparedPoint], list[int]]:
    """Normalize ids and vectors (last one wins for duplicate ids) and estimate each point's size."""
    by_id: dict[str, PreparedPoint] = {}
    for point in points:
        vector = _to_floats(point.vector)
        _check_dimension(name, vector, dimension, f"vector of point {point.id}")
        point_id = _normalize_id(point.id)
        sparse = point.sparse if point.sparse is not None and point.sparse.indices else None
        by_id[point_id] = (point_id, vector, dict(point.payload), sparse)
    prepared = list(by_id.values())
    sizes = [
        _estimate_point_bytes(vector, payload) + (24 * len(sparse.indices) if sparse else 0)
        for _, vector, payload, sparse in prepared
    ]
    return prepared, sizes


def _check_collection_name(name: str) -> None:
    """Raise ValueError for names that are not safe as a directory or collection name."""
    if not _COLLECTION_NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"invalid collection name {name!r}: use letters, digits, '_', '-' and '.' (not leading)"
        )


# ---------------------------------------------------------------------------------------------------------
# Qdrant Edge (embedded)
# ---------------------------------------------------------------------------------------------------------


class EdgeVectorIndex:
    """Embedded Qdrant Edge store: one shard directory per collection under ``path``.

    Only one process may open a store at a time: the constructor takes an exclusive, non-blocking
    ``flock`` on ``<path>/.spanqa-index.lock`` (held until ``close()``) and raises VectorIndexError at once
    if another process (or another open index in this process) holds it. Use as a context manager or call
    ``close()``; open the index after forking, never before.
    """

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the store directory and lock it.

        Args:
            path: The store directory.
        """
        import qdrant_edge

        self._q: Any = qdrant_edge
        self.path = Path(path).expanduser()
        self._shards: dict[str, Any] = {}
        self._dimensions: dict[str, int] = {}
        self._lexical: dict[str, bool] = {}  # per collection: read once from its edge_config.json
        self._mutex = threading.RLock()
        self._lock_fd: int | None = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VectorIndexError(
                f"cannot create the vector store directory {self.path}: {exc.strerror or exc}"
            ) from exc
        self._lock_fd = self._acquire_lock()
        logger.debug("opened Qdrant Edge store at %s", self.path)

    # -- locking ------------------------------------------------------------------------------------------

    def _in_use_error(self, holder: str = "") -> VectorIndexInUseError:
        """The error for a store that another process holds."""
        return VectorIndexInUseError(
            f"the vector store at {self.path} is in use by another spanqa process{holder}; "
            "only one process can open it at a time: wait for that process to finish or stop it "
            "(or run a Qdrant server and set SPANQA_QDRANT_URL to share the index)"
        )

    def _acquire_lock(self) -> int:
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
        """Raise VectorIndexError if close() was called."""
        if self._lock_fd is None:
            raise VectorIndexError(f"the vector store at {self.path} has been closed")

    def _collection_dir(self, name: str) -> Path:
        """The shard directory of collection ``name``."""
        _check_collection_name(name)
        return self.path / name

    def _edge_error(self, exc: BaseException, name: str, action: str) -> VectorIndexError:
        """Map an exception from qdrant_edge to a one-line VectorIndexError."""
        message = str(exc)
        if "WouldBlock" in message or "Resource temporarily unavailable" in message:
            return self._in_use_error()
        if "dimension error" in message.lower():
            return VectorIndexError(f"dimension mismatch in collection {name!r}: {_one_line(message)}")
        return VectorIndexError(f"cannot {action} collection {name!r} in {self.path}: {_one_line(message)}")

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

    def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` (cosine, payload indexes) unless it exists with this dimension.

        Args:
            name: Collection name.
            dimension: Vector dimension.
        """
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
                        self._lexical.pop(name, None)
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
                vectors=q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine),
                sparse_vectors={LEXICAL_VECTOR: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
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

    def has_collection(self, name: str) -> bool:
        """Whether collection ``name`` exists.

        Args:
            name: Collection name.

        Returns:
            True if it exists.
        """
        self._check_open()
        return name in self._shards or (self._collection_dir(name) / EDGE_CONFIG_FILE).is_file()

    def list_collections(self) -> list[str]:
        """All collections in the store, sorted.

        Returns:
            Collection names.
        """
        self._check_open()
        return sorted(
            entry.name
            for entry in self.path.iterdir()
            if entry.is_dir() and (entry / EDGE_CONFIG_FILE).is_file()
        )

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` (kept in a small JSON file, replaced atomically).

        Args:
            alias: Alias name.
            collection: An existing collection.
        """
        self._check_open()
        if not self.has_collection(collection):
            raise VectorIndexError(f"collection '{collection}' does not exist in {self.path}")
        aliases = self._read_aliases()
        aliases[alias] = collection
        partial = self.path / (EDGE_ALIASES_FILE + ".partial")
        partial.write_text(json.dumps(aliases, indent=1, sort_keys=True), encoding="utf-8")
        partial.replace(self.path / EDGE_ALIASES_FILE)

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

    def drop_collection(self, name: str) -> None:
        """Delete collection ``name`` and its files; no error if it does not exist.

        Args:
            name: Collection name.
        """
        self._check_open()
        with self._mutex:
            directory = self._collection_dir(name)
            shard = self._shards.pop(name, None)
            self._lexical.pop(name, None)
            self._dimensions.pop(name, None)
            if shard is not None:
                with contextlib.suppress(Exception):
                    shard.close()
            if directory.exists():
                shutil.rmtree(directory)
                logger.info("dropped collection %s from %s", name, self.path)

    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (by id); they are searchable when this returns.

        Args:
            name: Collection name.
            points: Points to store.
        """
        shard = self._shard(name)
        prepared, sizes = _prepare_points(name, points, self._dimensions.get(name))
        q = self._q
        for batch in _batches(prepared, sizes):
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

    def delete_points(self, name: str, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are ignored).

        Args:
            name: Collection name.
            ids: Point ids.
        """
        shard = self._shard(name)
        normalized = sorted({_normalize_id(point_id) for point_id in ids})
        for batch in _chunks(normalized, MAX_BATCH_POINTS):
            try:
                shard.update(self._q.UpdateOperation.delete_points(batch))
            except Exception as exc:
                raise self._edge_error(exc, name, "delete from") from None

    def delete_document(self, name: str, document_id: str) -> None:
        """Delete every point whose payload ``document_id`` is ``document_id``.

        Args:
            name: Collection name.
            document_id: The document's id.
        """
        shard = self._shard(name)
        try:
            shard.update(self._q.UpdateOperation.delete_points_by_filter(self._document_filter(document_id)))
        except Exception as exc:
            raise self._edge_error(exc, name, "delete from") from None

    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points nearest to ``vector`` (cosine), best first.

        Args:
            name: Collection name.
            vector: Query vector.
            limit: Maximum number of hits.
            filter: Optional restriction to documents/paths.

        Returns:
            Hits sorted by descending score.
        """
        shard = self._shard(name)
        query = _to_floats(vector)
        _check_dimension(name, query, self._dimensions.get(name), "query vector")
        if limit <= 0 or (filter is not None and filter.matches_nothing()):
            return []
        q = self._q
        request = q.QueryRequest(
            limit=limit,
            query=q.Query.Nearest(query),
            filter=self._search_filter(filter),
            with_payload=True,
            with_vector=False,
        )
        try:
            results = shard.query(request)
        except Exception as exc:
            raise self._edge_error(exc, name, "search") from None
        hits = [SearchHit(str(r.id), float(r.score), dict(r.payload or {})) for r in results]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits

    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points whose BM25 score for the query's terms is highest, best first.

        Args:
            name: Collection name.
            query: The query's terms (``Bm25Encoder.query``).
            limit: Maximum number of hits.
            filter: Optional restriction to documents/paths.

        Returns:
            Hits with a positive score, sorted by descending score ([] for a collection without terms).
        """
        shard = self._shard(name)
        if limit <= 0 or not query.indices or (filter is not None and filter.matches_nothing()):
            return []
        if not self.has_lexical(name):
            return []
        q = self._q
        request = q.QueryRequest(
            limit=limit,
            query=q.Query.Nearest(q.SparseVector(query.indices, query.values), using=LEXICAL_VECTOR),
            filter=self._search_filter(filter),
            with_payload=True,
            with_vector=False,
        )
        try:
            results = shard.query(request)
        except Exception as exc:
            raise self._edge_error(exc, name, "search") from None
        hits = [SearchHit(str(r.id), float(r.score), dict(r.payload or {})) for r in results if r.score > 0]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits

    def has_lexical(self, name: str) -> bool:
        """Whether the collection holds BM25 term weights (one made before lexical retrieval may not).

        Args:
            name: Collection name.

        Returns:
            True if its points can carry a lexical vector.
        """
        self._shard(name)
        cached = self._lexical.get(name)
        if cached is None:
            path = self._collection_dir(name) / EDGE_CONFIG_FILE
            try:
                config = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                message = f"cannot read the configuration of collection {name!r}: {exc}"
                raise VectorIndexError(message) from None
            cached = self._lexical[name] = LEXICAL_VECTOR in (config.get("sparse_vectors") or {})
        return cached

    def count(self, name: str, *, document_id: str | None = None) -> int:
        """The exact number of points, optionally of one document.

        Args:
            name: Collection name.
            document_id: Count only this document's points.

        Returns:
            The number of points.
        """
        shard = self._shard(name)
        q = self._q
        point_filter = None if document_id is None else self._document_filter(document_id)
        try:
            return int(shard.count(q.CountRequest(exact=True, filter=point_filter)))
        except Exception as exc:
            raise self._edge_error(exc, name, "count points in") from None

    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]:
        """Every point id, optionally of one document (scrolls the whole collection).

        Args:
            name: Collection name.
            document_id: Only this document's points.

        Returns:
            The set of point ids.
        """
        shard = self._shard(name)
        q = self._q
        point_filter = None if document_id is None else self._document_filter(document_id)
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

    def flush(self) -> None:
        """Write all pending changes of open collections to disk (the WAL already makes them durable)."""
        with self._mutex:
            for name, shard in self._shards.items():
                try:
                    shard.flush()
                except Exception as exc:
                    raise self._edge_error(exc, name, "flush") from None

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

    def close(self) -> None:
        """Flush and close every open collection and release the store lock; safe to call twice."""
        with self._mutex:
            for name, shard in list(self._shards.items()):
                try:
                    shard.flush()
                except Exception:
                    logger.exception("flushing collection %s failed", name)
                with contextlib.suppress(Exception):
                    shard.close()
            self._shards.clear()
            self._lexical.clear()
            self._dimensions.clear()
            self._release_lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EdgeVectorIndex({str(self.path)!r})"

    # -- filters ------------------------------------------------------------------------------------------

    def _document_filter(self, document_id: str) -> Any:
        """An Edge filter on one document id."""
        q = self._q
        return q.Filter(must=[q.FieldCondition(key="document_id", match=q.MatchValue(document_id))])

    def _search_filter(self, search_filter: SearchFilter | None) -> Any:
        """An Edge filter for a SearchFilter (None when it restricts nothing)."""
        if search_filter is None:
            return None
        q = self._q
        must = []
        if search_filter.document_ids is not None:
            must.append(
                q.FieldCondition(key="document_id", match=q.MatchAny(list(search_filter.document_ids)))
            )
        if search_filter.paths is not None:
            must.append(q.FieldCondition(key="path", match=q.MatchAny(list(search_filter.paths))))
        return q.Filter(must=must) if must else None


# ---------------------------------------------------------------------------------------------------------
# Qdrant server (qdrant-client)
# ---------------------------------------------------------------------------------------------------------


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (never show credentials)."""
    if url == ":memory:":
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class ServerVectorIndex:
    """A Qdrant server through ``qdrant_client`` (``url=":memory:"``: in-process local mode, for tests)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0) -> None:
        """Create the client (no request is made yet).

        Args:
            url: Server URL such as ``http://localhost:6333``, or ``:memory:``.
            api_key: Optional API key (never logged).
            timeout: Request timeout in seconds.
        """
        from qdrant_client import QdrantClient, models

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
                f"cannot create a Qdrant client for {self._display_url}: {_one_line(exc)}"
            ) from None
        logger.debug("using Qdrant at %s", self._display_url)

    # -- helpers ------------------------------------------------------------------------------------------

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
                f"cannot reach the Qdrant server at {self._display_url}: {_one_line(exc, 200)}"
            )
        where = f"collection {name!r} on " if name is not None else ""
        status = getattr(exc, "status_code", None)
        detail = f"HTTP {status}" if status is not None else type(exc).__name__
        content = getattr(exc, "content", None)
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(exc)
        kind = VectorIndexUnavailableError if transient else VectorIndexError
        return kind(
            f"Qdrant request failed ({action} {where}{self._display_url}, {detail}): {_one_line(text, 240)}"
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

    def _document_filter(self, document_id: str) -> Any:
        """A filter on one document id."""
        m = self._models
        return m.Filter(must=[m.FieldCondition(key="document_id", match=m.MatchValue(value=document_id))])

    def _search_filter(self, search_filter: SearchFilter | None) -> Any:
        """A filter for a SearchFilter (None when it restricts nothing)."""
        if search_filter is None:
            return None
        m = self._models
        must = []
        if search_filter.document_ids is not None:
            must.append(
                m.FieldCondition(key="document_id", match=m.MatchAny(any=list(search_filter.document_ids)))
            )
        if search_filter.paths is not None:
            must.append(m.FieldCondition(key="path", match=m.MatchAny(any=list(search_filter.paths))))
        return m.Filter(must=must) if must else None

    # -- VectorIndex --------------------------------------------------------------------------------------

    def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` (cosine, payload indexes) unless it exists with this dimension.

        Args:
            name: Collection name.
            dimension: Vector dimension.
        """
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
                        vectors_config=m.VectorParams(size=dimension, distance=m.Distance.COSINE),
                        sparse_vectors_config={LEXICAL_VECTOR: m.SparseVectorParams(modifier=m.Modifier.IDF)},
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
        """Whether collection ``name`` exists.

        Args:
            name: Collection name.

        Returns:
            True if it exists.
        """
        return bool(self._call("look up", name, lambda: self._client.collection_exists(name)))

    def list_collections(self) -> list[str]:
        """All collections on the server, sorted.

        Returns:
            Collection names.
        """
        response = self._call("list collections on", None, self._client.get_collections)
        return sorted(collection.name for collection in response.collections)

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` in one atomic alias update on the server.

        Args:
            alias: Alias name.
            collection: An existing collection.
        """
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
        """Delete collection ``name``; no error if it does not exist.

        Args:
            name: Collection name.
        """
        self._dimensions.pop(name, None)
        self._lexical.pop(name, None)
        try:
            self._call("drop", name, lambda: self._client.delete_collection(name))
        except VectorIndexError:
            if self.has_collection(name):
                raise

    def upsert(self, name: str, points: Sequence[IndexPoint]) -> None:
        """Insert or replace points (by id) in batches under ~4 MB; they are searchable when this returns.

        Args:
            name: Collection name.
            points: Points to store.
        """
        prepared, sizes = _prepare_points(name, points, self._dimension(name))
        m = self._models
        lexical = self.has_lexical(name)
        for batch in _batches(prepared, sizes):
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
        """Delete points by id (unknown ids are ignored).

        Args:
            name: Collection name.
            ids: Point ids.
        """
        normalized = sorted({_normalize_id(point_id) for point_id in ids})
        self._dimension(name)  # a missing collection is an error, as with Edge
        m = self._models
        for batch in _chunks(normalized, MAX_BATCH_POINTS):
            selector = m.PointIdsList(points=batch)
            self._call(
                "delete from", name, partial(self._client.delete, name, points_selector=selector, wait=True)
            )

    def delete_document(self, name: str, document_id: str) -> None:
        """Delete every point whose payload ``document_id`` is ``document_id``.

        Args:
            name: Collection name.
            document_id: The document's id.
        """
        self._dimension(name)
        selector = self._models.FilterSelector(filter=self._document_filter(document_id))
        self._call(
            "delete from", name, lambda: self._client.delete(name, points_selector=selector, wait=True)
        )

    def search(
        self, name: str, vector: Sequence[float], *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points nearest to ``vector`` (cosine), best first.

        Args:
            name: Collection name.
            vector: Query vector.
            limit: Maximum number of hits.
            filter: Optional restriction to documents/paths.

        Returns:
            Hits sorted by descending score.
        """
        query = _to_floats(vector)
        _check_dimension(name, query, self._dimension(name), "query vector")
        if limit <= 0 or (filter is not None and filter.matches_nothing()):
            return []
        query_filter = self._search_filter(filter)
        response = self._call(
            "search",
            name,
            lambda: self._client.query_points(
                name,
                query=query,
                limit=limit,
                query_filter=query_filter,
                with_payload=True,
                with_vectors=False,
            ),
        )
        hits = [SearchHit(str(p.id), float(p.score), dict(p.payload or {})) for p in response.points]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits

    def search_lexical(
        self, name: str, query: SparseVector, *, limit: int = 10, filter: SearchFilter | None = None
    ) -> list[SearchHit]:
        """The ``limit`` points whose BM25 score for the query's terms is highest, best first.

        Args:
            name: Collection name.
            query: The query's terms (``Bm25Encoder.query``).
            limit: Maximum number of hits.
            filter: Optional restriction to documents/paths.

        Returns:
            Hits with a positive score, sorted by descending score ([] for a collection without terms).
        """
        if limit <= 0 or not query.indices or (filter is not None and filter.matches_nothing()):
            return []
        if not self.has_lexical(name):
            return []
        sparse = self._models.SparseVector(indices=list(query.indices), values=list(query.values))
        query_filter = self._search_filter(filter)
        response = self._call(
            "search",
            name,
            lambda: self._client.query_points(
                name,
                query=sparse,
                using=LEXICAL_VECTOR,
                limit=limit,
                query_filter=query_filter,
                with_payload=True,
                with_vectors=False,
            ),
        )
        points = [p for p in response.points if p.score > 0]
        hits = [SearchHit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return hits

    def has_lexical(self, name: str) -> bool:
        """Whether the collection holds BM25 term weights (one made before lexical retrieval may not).

        Args:
            name: Collection name.

        Returns:
            True if its points can carry a lexical vector.
        """
        cached = self._lexical.get(name)
        if cached is None:
            info = self._call("read", name, lambda: self._client.get_collection(name))
            cached = LEXICAL_VECTOR in (info.config.params.sparse_vectors or {})
            self._lexical[name] = cached
        return cached

    def count(self, name: str, *, document_id: str | None = None) -> int:
        """The exact number of points, optionally of one document.

        Args:
            name: Collection name.
            document_id: Count only this document's points.

        Returns:
            The number of points.
        """
        count_filter = None if document_id is None else self._document_filter(document_id)
        response = self._call(
            "count points in", name, lambda: self._client.count(name, count_filter=count_filter, exact=True)
        )
        return int(response.count)

    def point_ids(self, name: str, *, document_id: str | None = None) -> set[str]:
        """Every point id, optionally of one document (scrolls the whole collection).

        Args:
            name: Collection name.
            document_id: Only this document's points.

        Returns:
            The set of point ids.
        """
        scroll_filter = None if document_id is None else self._document_filter(document_id)
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

    def close(self) -> None:
        """Close the client; safe to call twice."""
        with contextlib.suppress(Exception):
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ServerVectorIndex({self._display_url!r})"


def open_vector_index(
    *,
    path: str | Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> VectorIndex:
    """Open the configured vector index: a Qdrant server if ``url`` is given, else the Edge store at ``path``.

    Args:
        path: Directory of the embedded Qdrant Edge store.
        url: Qdrant server URL (wins over ``path``); ``:memory:`` for an in-process store.
        api_key: API key for the server.
        timeout: Server request timeout in seconds.

    Returns:
        An open VectorIndex; close it when done.
    """
    if url:
        return ServerVectorIndex(url, api_key=api_key, timeout=timeout)
    if path is None:
        raise ValueError("open_vector_index needs a path (Qdrant Edge) or a url (Qdrant server)")
    return EdgeVectorIndex(path)
