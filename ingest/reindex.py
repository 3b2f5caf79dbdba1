"""Blue/green re-index: fill a new collection from the catalog's chunk texts, then switch in one step."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from spanqa.ingest.catalog import Catalog
from spanqa.ingest.job import build_graph
from spanqa.ingest.points import make_point
from spanqa.retriever.encoder import TextEncoder
from spanqa.retriever.index import ACTIVE_ALIAS, VectorIndex, collection_name
from spanqa.types import IndexVersion

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReindexReport:
    previous: IndexVersion | None
    current: IndexVersion
    chunks: int
    seconds: float
    #: Of ``seconds``, the HNSW graph's build before the switch (0: not due).
    index_build_seconds: float = 0.0
    #: Why a due build left the new collection without its graph (search is exact and slower until the next
    #: ingest builds it); None when built or not due.
    index_build_note: str | None = None


def reindex(
    *,
    catalog: Catalog,
    encoder: TextEncoder,
    index: VectorIndex,
    batch_size: int = 256,
    on_progress: Callable[[int, int], None] | None = None,
    hnsw_build_at: int = 0,
    on_build: Callable[[int], None] | None = None,
) -> ReindexReport:
    """Rebuild the vectors of every chunk with ``encoder`` into a new collection, then make it active.

    No file is parsed again: the chunk texts come from the catalog. Questions keep being answered from the
    active collection until the switch, which is one catalog transaction (then the ``spanqa_active`` alias
    moves in one alias update); the collection it replaces is kept
    (retired) until the next re-index, so a search that started before the switch still finds it.

    Args:
        catalog: the SQL catalog.
        encoder: the retriever model for the new collection (the same one for a plain rebuild).
        index: the vector index.
        batch_size: chunks per encoder call.
        on_progress: called with (chunks done, chunks total).
        hnsw_build_at: when at least this many vectors were written, build the new collection's HNSW graph
            before the switch, so that it goes live as fast to search as the one it replaces (0: never).
        on_build: told the number of vectors before that build (a long, silent step).

    Returns:
        The previous and the new index version.
    """
    started = time.perf_counter()
    previous = catalog.active_index()
    dimension = encoder.dimension
    taken = {v.collection for v in catalog.index_versions()} | set(index.list_collections())
    version = 1
    while collection_name(encoder.model_name, dimension, version) in taken:
        version += 1
    name = collection_name(encoder.model_name, dimension, version)
    index.ensure_collection(name, dimension)
    building = catalog.create_index_version(
        model_name=encoder.model_name,
        dimension=dimension,
        collection=name,
        active=False,
        pooling=encoder.pooling,
    )
    total = catalog.counts()["chunks"]
    done = 0
    for chunks in catalog.iter_chunks(batch_size):
        paths = {d.id: d.path for d in catalog.documents_by_id({c.document_id for c in chunks})}
        vectors = encoder.encode([c.search_text for c in chunks])
        points = [
            make_point(c, paths.get(c.document_id, ""), v) for c, v in zip(chunks, vectors, strict=True)
        ]
        index.upsert(name, points)
        done += len(chunks)
        if on_progress is not None:
            on_progress(done, total)
    build_seconds, note = 0.0, None
    if 0 < hnsw_build_at <= done:
        build_seconds, note = build_graph(index, name, done, on_build)
    catalog.activate_index_version(building.id)
    index.set_alias(ACTIVE_ALIAS, name)  # for anything reading the Qdrant server directly
    # Older retired collections are dropped now; the one just replaced stays for searches in flight.
    for old in catalog.index_versions():
        if old.status.value == "retired" and (previous is None or old.id != previous.id):
            index.drop_collection(old.collection)
    current = catalog.active_index()
    assert current is not None
    logger.info("re-indexed %d chunks into %s", done, name)
    return ReindexReport(previous, current, done, time.perf_counter() - started, build_seconds, note)
