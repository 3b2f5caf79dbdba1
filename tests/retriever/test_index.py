"""Contract tests for the vector index backends (Qdrant Edge, qdrant-client local mode, optional server)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spanqa.retriever.index import (
    EdgeVectorIndex,
    IndexPoint,
    SearchFilter,
    SearchHit,
    ServerVectorIndex,
    VectorIndex,
    VectorIndexError,
    collection_name,
    open_vector_index,
)
from spanqa.retriever.index.base import MAX_BATCH_POINTS, MAX_REQUEST_BYTES, request_batches
from spanqa.retriever.index.edge import EDGE_LOCK_FILE
from spanqa.retriever.lexical import Bm25Encoder

DIM = 8
REPO_ROOT = Path(__file__).resolve().parents[2]
SUBPROCESS_TIMEOUT_S = 60


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    """``n`` random L2-normalized float32 vectors."""
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def make_points(
    rng: np.random.Generator,
    document_id: str,
    path: str,
    n: int,
    *,
    vectors: np.ndarray | None = None,
    pages: bool = True,
) -> list[IndexPoint]:
    """``n`` chunk points of one document with deterministic UUIDs and full payloads."""
    vectors = unit_vectors(rng, n) if vectors is None else vectors
    points = []
    for ordinal in range(n):
        chunk_id = str(uuid.UUID(bytes=rng.bytes(16), version=4))
        payload: dict[str, Any] = {
            "document_id": document_id,
            "chunk_id": chunk_id,
            "path": path,
            "ordinal": ordinal,
            "char_start": ordinal * 100,
            "char_end": ordinal * 100 + 120,
            "page": (ordinal + 1) if pages else None,
        }
        points.append(IndexPoint(id=chunk_id, vector=vectors[ordinal], payload=payload))
    return points


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(params=["edge", "memory", "server"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """Each backend in turn; the real server only when QDRANT_URL is set."""
    backend: VectorIndex
    if request.param == "edge":
        backend = EdgeVectorIndex(tmp_path / "store")
    elif request.param == "memory":
        backend = ServerVectorIndex(":memory:")
    else:
        url = os.environ.get("QDRANT_URL")
        if not url:
            pytest.skip("QDRANT_URL not set: no Qdrant server to test against")
        backend = ServerVectorIndex(url, api_key=os.environ.get("QDRANT_API_KEY"))
    yield backend
    backend.close()


@pytest.fixture
def coll(index: VectorIndex) -> Iterator[str]:
    """A fresh collection name (unique, so a shared server is left clean), dropped afterwards."""
    name = f"spanqa_test_{uuid.uuid4().hex[:12]}"
    yield name
    with contextlib.suppress(VectorIndexError):  # an index closed by the test itself
        index.drop_collection(name)


# ---------------------------------------------------------------------------------------------------------
# Contract (every backend)
# ---------------------------------------------------------------------------------------------------------


def test_ensure_collection_is_idempotent(index: VectorIndex, coll: str) -> None:
    assert not index.has_collection(coll)
    index.ensure_collection(coll, DIM)
    index.ensure_collection(coll, DIM)
    assert index.has_collection(coll)
    assert index.list_collections().count(coll) == 1
    assert index.count(coll) == 0


def test_ensure_collection_dimension_mismatch(index: VectorIndex, coll: str) -> None:
    index.ensure_collection(coll, DIM)
    with pytest.raises(VectorIndexError, match="dimension") as excinfo:
        index.ensure_collection(coll, DIM * 2)
    assert "\n" not in str(excinfo.value)
    index.ensure_collection(coll, DIM)  # still usable


def test_upsert_then_count_and_point_ids(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    a = make_points(rng, "doc-a", "/docs/a.txt", 5)
    b = make_points(rng, "doc-b", "/docs/b.txt", 3)
    index.upsert(coll, a + b)
    assert index.count(coll) == 8
    assert index.count(coll, document_id="doc-a") == 5
    assert index.count(coll, document_id="doc-b") == 3
    assert index.count(coll, document_id="doc-missing") == 0
    assert index.point_ids(coll) == {p.id for p in a + b}
    assert index.point_ids(coll, document_id="doc-b") == {p.id for p in b}
    assert index.point_ids(coll, document_id="doc-missing") == set()


def test_upsert_same_ids_twice_has_no_duplicates(
    index: VectorIndex, coll: str, rng: np.random.Generator
) -> None:
    index.ensure_collection(coll, DIM)
    points = make_points(rng, "doc-a", "/docs/a.txt", 4)
    index.upsert(coll, points)
    moved = [IndexPoint(p.id, unit_vectors(rng, 1)[0], {**p.payload, "path": "/moved.txt"}) for p in points]
    index.upsert(coll, moved)
    index.upsert(coll, moved[:1] + moved[:1])  # duplicate ids inside one call too
    assert index.count(coll) == 4
    assert index.point_ids(coll) == {p.id for p in points}
    hits = index.search(coll, moved[2].vector, limit=10)
    assert len(hits) == 4
    assert hits[0].id == points[2].id
    assert {hit.payload["path"] for hit in hits} == {"/moved.txt"}


def test_search_orders_by_cosine_similarity(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    vectors = unit_vectors(rng, 40)
    points = make_points(rng, "doc-a", "/docs/a.txt", 40, vectors=vectors)
    index.upsert(coll, points)
    query = vectors[17] + 0.05 * unit_vectors(rng, 1)[0]
    expected = np.argsort(-(vectors @ (query / np.linalg.norm(query))))
    for scale in (1.0, 3.7):  # ordering and scores must not depend on the query being normalized
        hits = index.search(coll, (query * scale).tolist(), limit=5)
        assert len(hits) == 5
        assert all(isinstance(hit, SearchHit) for hit in hits)
        assert hits[0].id == points[17].id
        assert [hit.id for hit in hits] == [points[i].id for i in expected[:5]]
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        cosine = float(vectors[17] @ query / np.linalg.norm(query))
        assert hits[0].score == pytest.approx(cosine, abs=1e-4)
    assert len(index.search(coll, query, limit=1)) == 1
    assert len(index.search(coll, query, limit=100)) == 40
    assert index.search(coll, query, limit=0) == []


def test_search_many_answers_each_vector_as_search_does(
    index: VectorIndex, coll: str, rng: np.random.Generator
) -> None:
    index.ensure_collection(coll, DIM)
    vectors = unit_vectors(rng, 30)
    index.upsert(coll, make_points(rng, "doc-a", "/docs/a.txt", 30, vectors=vectors))
    queries = unit_vectors(rng, 7)
    batched = index.search_many(coll, queries.tolist(), limit=3)
    assert len(batched) == 7
    for query, hits in zip(queries, batched, strict=True):
        single = index.search(coll, query.tolist(), limit=3)
        assert [hit.id for hit in hits] == [hit.id for hit in single]
        assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in single], abs=1e-5)
    assert index.search_many(coll, [], limit=3) == []


def test_search_exact_match_scores_one(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    points = make_points(rng, "doc-a", "/docs/a.txt", 10)
    index.upsert(coll, points)
    hit = index.search(coll, points[3].vector, limit=1)[0]
    assert hit.id == points[3].id
    assert hit.score == pytest.approx(1.0, abs=1e-4)


def test_search_filters(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    a = make_points(rng, "doc-a", "/docs/a.txt", 6)
    b = make_points(rng, "doc-b", "/docs/b.txt", 6)
    c = make_points(rng, "doc-c", "/docs/c.txt", 6)
    index.upsert(coll, a + b + c)
    query = a[0].vector  # nearest overall is in doc-a, so the filters must really exclude it

    hits = index.search(coll, query, limit=50, filter=SearchFilter(document_ids=["doc-b"]))
    assert {hit.id for hit in hits} == {p.id for p in b}

    hits = index.search(coll, query, limit=50, filter=SearchFilter(document_ids=["doc-b", "doc-c"]))
    assert {hit.id for hit in hits} == {p.id for p in b + c}

    hits = index.search(coll, query, limit=50, filter=SearchFilter(paths=["/docs/c.txt"]))
    assert {hit.id for hit in hits} == {p.id for p in c}

    hits = index.search(coll, query, limit=50, filter=SearchFilter(paths=["/docs/c"]))  # exact, no prefix
    assert hits == []

    both = SearchFilter(document_ids=["doc-a", "doc-b"], paths=["/docs/b.txt", "/docs/c.txt"])
    assert {hit.id for hit in index.search(coll, query, limit=50, filter=both)} == {p.id for p in b}

    assert index.search(coll, query, limit=50, filter=SearchFilter(document_ids=[])) == []
    assert len(index.search(coll, query, limit=50, filter=SearchFilter())) == 18

    top = index.search(coll, query, limit=2, filter=SearchFilter(document_ids=["doc-a"]))
    assert top[0].id == a[0].id
    assert len(top) == 2


def test_delete_document_removes_only_that_document(
    index: VectorIndex, coll: str, rng: np.random.Generator
) -> None:
    index.ensure_collection(coll, DIM)
    a = make_points(rng, "doc-a", "/docs/a.txt", 5)
    b = make_points(rng, "doc-b", "/docs/b.txt", 4)
    index.upsert(coll, a + b)
    index.delete_document(coll, "doc-a")
    assert index.count(coll) == 4
    assert index.count(coll, document_id="doc-a") == 0
    assert index.point_ids(coll) == {p.id for p in b}
    assert {hit.id for hit in index.search(coll, a[0].vector, limit=20)} == {p.id for p in b}
    index.delete_document(coll, "doc-a")  # nothing left: no error
    index.delete_document(coll, "doc-never-indexed")
    assert index.count(coll) == 4


def test_delete_points(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    points = make_points(rng, "doc-a", "/docs/a.txt", 6)
    index.upsert(coll, points)
    unknown = str(uuid.UUID(bytes=rng.bytes(16), version=4))
    index.delete_points(coll, [points[1].id, points[4].id, unknown])
    assert index.point_ids(coll) == {p.id for i, p in enumerate(points) if i not in (1, 4)}
    assert index.count(coll) == 4
    index.delete_points(coll, [])
    assert index.count(coll) == 4


def test_drop_collection(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    index.upsert(coll, make_points(rng, "doc-a", "/docs/a.txt", 3))
    index.drop_collection(coll)
    assert not index.has_collection(coll)
    assert coll not in index.list_collections()
    index.drop_collection(coll)  # missing: no error
    with pytest.raises(VectorIndexError, match="does not exist"):
        index.count(coll)
    with pytest.raises(VectorIndexError):
        index.search(coll, unit_vectors(rng, 1)[0])
    index.ensure_collection(coll, DIM * 2)  # recreated with another dimension
    assert index.count(coll) == 0


def test_missing_collection_errors(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    point = make_points(rng, "doc-a", "/docs/a.txt", 1)
    for call in (
        lambda: index.upsert(coll, point),
        lambda: index.delete_points(coll, [point[0].id]),
        lambda: index.delete_document(coll, "doc-a"),
        lambda: index.search(coll, point[0].vector),
        lambda: index.count(coll),
        lambda: index.point_ids(coll),
    ):
        with pytest.raises(VectorIndexError, match="does not exist"):
            call()


def test_payload_round_trip(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    with_pages = make_points(rng, "doc-pdf", "/docs/ü ber.pdf", 3, pages=True)
    without_pages = make_points(rng, "doc-txt", "/docs/plain.txt", 3, pages=False)
    index.upsert(coll, with_pages + without_pages)
    for point in with_pages + without_pages:
        hit = index.search(coll, point.vector, limit=1)[0]
        assert hit.id == point.id
        assert hit.payload == point.payload
        assert type(hit.payload["ordinal"]) is int
        assert type(hit.payload["char_start"]) is int
    assert index.search(coll, without_pages[0].vector, limit=1)[0].payload["page"] is None


def test_vector_dimension_mismatch_on_upsert_and_search(
    index: VectorIndex, coll: str, rng: np.random.Generator
) -> None:
    index.ensure_collection(coll, DIM)
    bad = IndexPoint(str(uuid.uuid4()), [0.5] * (DIM + 1), {"document_id": "d", "path": "p"})
    with pytest.raises(VectorIndexError, match="dimension"):
        index.upsert(coll, [bad])
    with pytest.raises(VectorIndexError, match="dimension"):
        index.search(coll, [0.5] * (DIM - 1))
    assert index.count(coll) == 0


def test_ids_must_be_uuids(index: VectorIndex, coll: str) -> None:
    index.ensure_collection(coll, DIM)
    with pytest.raises(ValueError, match="UUID"):
        index.upsert(coll, [IndexPoint("chunk-1", [1.0] * DIM, {"document_id": "d", "path": "p"})])
    upper = str(uuid.uuid4()).upper()
    index.upsert(coll, [IndexPoint(upper, [1.0] * DIM, {"document_id": "d", "path": "p"})])
    assert index.point_ids(coll) == {upper.lower()}  # returned in canonical (lowercase) form


def test_many_points_batched_and_scrolled(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    n = MAX_BATCH_POINTS * 2 + 37
    points = make_points(rng, "doc-big", "/docs/big.txt", n)
    index.upsert(coll, points)
    assert index.count(coll) == n
    assert index.point_ids(coll) == {p.id for p in points}


# ---------------------------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------------------------


def test_collection_name_format() -> None:
    assert (
        collection_name("sentence-transformers/all-MiniLM-L6-v2", 384) == "chunks__all-minilm-l6-v2__384d__v1"
    )
    assert collection_name("all-MiniLM-L6-v2", 384, version=2) == "chunks__all-minilm-l6-v2__384d__v2"
    assert collection_name("/models/My_Model.v1.5/", 768) == "chunks__my-model-v1-5__768d__v1"
    assert collection_name("C:\\models\\e5 base", 1024) == "chunks__e5-base__1024d__v1"
    for name in ("intfloat/e5-base-v2", "BAAI/bge-small-en-v1.5", "x" * 300):
        result = collection_name(name, 384)
        slug = result.split("__")[1]
        assert slug and set(slug) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
        assert result.startswith("chunks__") and result.endswith("__384d__v1")
    with pytest.raises(ValueError):
        collection_name("///", 384)
    with pytest.raises(ValueError):
        collection_name("model", 0)


def test_upsert_batches_stay_under_request_limit() -> None:
    sizes = [MAX_REQUEST_BYTES // 3] * 10 + [10] * (MAX_BATCH_POINTS + 5)
    batches = list(request_batches(list(range(len(sizes))), sizes))
    assert [i for batch in batches for i in batch] == list(range(len(sizes)))
    for batch in batches:
        assert len(batch) <= MAX_BATCH_POINTS
        assert sum(sizes[i] for i in batch) <= MAX_REQUEST_BYTES
    assert MAX_REQUEST_BYTES < 5 * 1024 * 1024


def test_open_vector_index_url_wins(tmp_path: Path) -> None:
    index = open_vector_index(path=tmp_path / "store", url=":memory:")
    try:
        assert isinstance(index, ServerVectorIndex)
        assert not (tmp_path / "store").exists()
    finally:
        index.close()
    index = open_vector_index(path=tmp_path / "store")
    try:
        assert isinstance(index, EdgeVectorIndex)
        assert isinstance(index, VectorIndex)
    finally:
        index.close()
    with pytest.raises(ValueError):
        open_vector_index()


def test_server_repr_hides_credentials() -> None:
    index = ServerVectorIndex("https://user:secret@qdrant.example:6333/?api-key=secret", api_key="secret")
    assert "secret" not in repr(index)
    index.close()


# ---------------------------------------------------------------------------------------------------------
# Edge only: persistence and the one-process lock
# ---------------------------------------------------------------------------------------------------------


def test_edge_persists_across_close_and_reopen(tmp_path: Path, rng: np.random.Generator) -> None:
    store = tmp_path / "store"
    points = make_points(rng, "doc-a", "/docs/a.txt", 7) + make_points(rng, "doc-b", "/b", 2, pages=False)
    with EdgeVectorIndex(store) as index:
        index.ensure_collection("chunks__m__8d__v1", DIM)
        index.ensure_collection("other", 4)
        index.upsert("chunks__m__8d__v1", points)
        index.delete_points("chunks__m__8d__v1", [points[0].id])
    with EdgeVectorIndex(store) as index:
        assert index.list_collections() == ["chunks__m__8d__v1", "other"]
        assert index.count("chunks__m__8d__v1") == 8
        assert index.point_ids("chunks__m__8d__v1") == {p.id for p in points[1:]}
        hit = index.search("chunks__m__8d__v1", points[8].vector, limit=1)[0]
        assert hit.id == points[8].id
        assert hit.payload == points[8].payload
        with pytest.raises(VectorIndexError, match="dimension"):
            index.ensure_collection("other", DIM)
        index.ensure_collection("chunks__m__8d__v1", DIM)
        assert index.count("chunks__m__8d__v1", document_id="doc-b") == 2


def _open_in_subprocess(store: Path) -> subprocess.CompletedProcess[str]:
    """Try to open ``store`` from another Python process; exit 3 on VectorIndexError."""
    code = (
        "import sys\n"
        "from retriever.index import EdgeVectorIndex, VectorIndexError\n"
        "try:\n"
        "    index = EdgeVectorIndex(sys.argv[1])\n"
        "except VectorIndexError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
        "print(index.count('c'))\n"
        "index.close()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-c", code, str(store)],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        cwd=REPO_ROOT,
        env=env,
    )


def test_edge_second_process_is_refused_quickly(tmp_path: Path, rng: np.random.Generator) -> None:
    store = tmp_path / "store"
    index = EdgeVectorIndex(store)
    index.ensure_collection("c", DIM)
    index.upsert("c", make_points(rng, "doc-a", "/a", 3))
    try:
        started = time.monotonic()
        result = _open_in_subprocess(store)  # TimeoutExpired here would mean it hung
        assert result.returncode == 3, result.stderr
        assert f"the vector store at {store} is in use by another spanqa process" in result.stdout
        assert f"pid {os.getpid()}" in result.stdout
        assert len(result.stdout.strip().splitlines()) == 1
        assert time.monotonic() - started < SUBPROCESS_TIMEOUT_S
    finally:
        index.close()
    result = _open_in_subprocess(store)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "3"


def test_edge_second_open_in_same_process_is_refused(tmp_path: Path) -> None:
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        with pytest.raises(VectorIndexError, match="in use by another spanqa process"):
            EdgeVectorIndex(tmp_path)
    with EdgeVectorIndex(tmp_path) as again:
        assert again.has_collection("c")


def test_edge_closed_index_refuses_calls(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path)
    index.ensure_collection("c", DIM)
    index.close()
    index.close()  # twice is fine
    with pytest.raises(VectorIndexError, match="closed"):
        index.count("c")


def test_edge_rejects_unsafe_collection_names(tmp_path: Path) -> None:
    with EdgeVectorIndex(tmp_path) as index:
        for bad in ("../escape", ".hidden", "a/b", ""):
            with pytest.raises(ValueError):
                index.ensure_collection(bad, DIM)


def test_edge_optimize_keeps_results(tmp_path: Path, rng: np.random.Generator) -> None:
    points = make_points(rng, "doc-a", "/a", 50)
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", points)
        index.delete_points("c", [points[0].id])
        index.optimize("c")
        assert index.count("c") == 49
        assert index.search("c", points[7].vector, limit=1)[0].id == points[7].id


def test_alias_points_at_one_collection_and_moves(index: VectorIndex) -> None:
    index.ensure_collection("alias_a", 4)
    index.ensure_collection("alias_b", 4)
    assert index.alias_target("current") is None
    index.set_alias("current", "alias_a")
    assert index.alias_target("current") == "alias_a"
    index.set_alias("current", "alias_b")
    assert index.alias_target("current") == "alias_b"
    with pytest.raises(VectorIndexError):
        index.set_alias("current", "missing_collection")


def test_server_calls_retry_transient_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    from spanqa.retriever.index import ServerVectorIndex, VectorIndexUnavailableError
    from spanqa.retriever.index import server as index_module

    monkeypatch.setattr(index_module, "RETRY_BASE_DELAY_S", 0.0)
    server = ServerVectorIndex(":memory:")
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("connection refused")
        return "ok"

    assert server._call("test", None, flaky) == "ok" and len(calls) == 3

    def down() -> str:
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(VectorIndexUnavailableError, match="cannot reach"):
        server._call("test", None, down)

    class BadRequest(Exception):
        status_code = 400

    attempts: list[int] = []

    def bad() -> str:
        attempts.append(1)
        raise BadRequest("wrong payload")

    with pytest.raises(VectorIndexError) as info:
        server._call("test", "c", bad)
    assert len(attempts) == 1 and not isinstance(info.value, VectorIndexUnavailableError)
    server.close()


# ---------------------------------------------------------------------------------------------------------
# Lexical (BM25) terms in the same points (every backend)
# ---------------------------------------------------------------------------------------------------------


def _with_terms(points: list[IndexPoint], texts: list[str]) -> list[IndexPoint]:
    bm25 = Bm25Encoder()
    return [
        IndexPoint(p.id, p.vector, p.payload, bm25.document(t)) for p, t in zip(points, texts, strict=True)
    ]


def test_lexical_search_finds_exact_identifiers(
    index: VectorIndex, coll: str, rng: np.random.Generator
) -> None:
    index.ensure_collection(coll, DIM)
    assert index.has_lexical(coll)
    texts = [
        "shared_buffers sets the amount of memory the server uses for shared buffers",
        "work_mem sets the base maximum amount of memory used by a query operation",
        "wal_level determines how much information is written to the WAL",
    ]
    points = _with_terms(make_points(rng, "doc-a", "/docs/a.html", 3), texts)
    points.append(make_points(rng, "doc-b", "/docs/b.html", 1)[0])  # a point without terms
    index.upsert(coll, points)
    query = Bm25Encoder().query("What is the default value of work_mem?")
    hits = index.search_lexical(coll, query, limit=5)
    assert [h.id for h in hits][:1] == [points[1].id]
    assert all(h.score > 0 for h in hits) and points[3].id not in {h.id for h in hits}
    assert hits[0].payload["document_id"] == "doc-a"
    assert index.search_lexical(coll, Bm25Encoder().query("receipts"), limit=5) == []
    only_b = SearchFilter(document_ids=["doc-b"])
    assert index.search_lexical(coll, query, limit=5, filter=only_b) == []
    # Deleting points drops their terms with them: nothing stale is found.
    index.delete_points(coll, [points[1].id])
    assert points[1].id not in {h.id for h in index.search_lexical(coll, query, limit=5)}
    index.delete_document(coll, "doc-a")
    assert index.search_lexical(coll, Bm25Encoder().query("shared_buffers wal_level"), limit=5) == []


def test_replaced_point_loses_its_old_terms(index: VectorIndex, coll: str, rng: np.random.Generator) -> None:
    index.ensure_collection(coll, DIM)
    [point] = _with_terms(make_points(rng, "doc-a", "/docs/a.html", 1), ["the vistula river"])
    index.upsert(coll, [point])
    [changed] = _with_terms([point], ["the oder river"])
    index.upsert(coll, [changed])
    bm25 = Bm25Encoder()
    assert index.search_lexical(coll, bm25.query("vistula"), limit=5) == []
    assert [h.id for h in index.search_lexical(coll, bm25.query("oder"), limit=5)] == [point.id]


@pytest.mark.slow
@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_edge_builds_the_hnsw_graph_and_says_so(
    tmp_path: Path, rng: np.random.Generator, quantization: str
) -> None:
    # Enough 384-d vectors to pass Edge's own indexing threshold (about 10 MB of vectors, in KB).
    vectors = rng.standard_normal((8000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    points = make_points(rng, "doc-a", "/a", len(vectors), vectors=vectors)
    with EdgeVectorIndex(tmp_path, quantization=quantization) as index:
        index.ensure_collection("c", 384)
        for start in range(0, len(points), 2000):
            index.upsert("c", points[start : start + 2000])
        before = index.stats("c")
        assert before.points == 8000 and before.unindexed == 8000 - before.indexed > 0
        assert index.build_search_index("c")
        after = index.stats("c")
        assert after.points == after.indexed == 8000 and after.unindexed == 0
        assert index.search("c", vectors[123], limit=1)[0].id == points[123].id  # the graph finds it


def test_edge_int8_collection_searches_as_float32_and_keeps_its_layout(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    vectors = unit_vectors(rng, 300, 32)
    points = make_points(rng, "doc-a", "/a", len(vectors), vectors=vectors)
    queries = unit_vectors(rng, 20, 32)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :5]
    with EdgeVectorIndex(tmp_path, quantization="int8") as index:
        index.ensure_collection("q", 32)
        index.upsert("q", points)
        for query, best in zip(queries, exact, strict=True):
            hits = index.search("q", query, limit=5)
            assert [h.id for h in hits] == [points[i].id for i in best]
            # Scores are the float32 cosines (rescored), not the int8 copy's approximations.
            assert abs(hits[0].score - float(query @ vectors[best[0]])) < 1e-4
    config = json.loads((tmp_path / "q" / "edge_config.json").read_text())
    assert "int8" in json.dumps(config["vectors"][""]["quantization_config"]).lower()
    assert config["sparse_vectors"]["lexical"]["memory"] == "cold"  # a big store's BM25 index stays on disk
    with EdgeVectorIndex(tmp_path) as index:  # opened with the default: the collection keeps its own
        index.ensure_collection("q", 32)
        index.ensure_collection("plain", 32)
        assert index.search("q", queries[0], limit=1)[0].id == points[exact[0][0]].id
    assert "int8" in (tmp_path / "q" / "edge_config.json").read_text().lower()
    assert "int8" not in (tmp_path / "plain" / "edge_config.json").read_text().lower()
    with pytest.raises(ValueError, match="quantization must be one of none, int8"):
        EdgeVectorIndex(tmp_path / "other", quantization="pq")


def test_stats_count_the_points_on_both_backends(index: VectorIndex, rng: np.random.Generator) -> None:
    index.ensure_collection("stats_c", DIM)
    index.upsert("stats_c", make_points(rng, "doc-a", "/a", 12))
    stats = index.stats("stats_c")
    assert stats.points == 12 and 0 <= stats.indexed <= 12 and stats.segments >= 1
    assert stats.unindexed == 12 - stats.indexed
    assert isinstance(index.build_search_index("stats_c"), bool)
    index.release()  # the embedded store gives its lock back and takes it again at the next call
    assert index.count("stats_c") == 12


def _lock_is_free(store: Path) -> bool:
    """Whether another process could take the store's lock now."""
    import fcntl

    fd = os.open(store / EDGE_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing gives back a lock taken here
    return True


def test_edge_builds_the_graph_on_a_copy_with_the_store_free(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanqa.retriever.index import edge_optimize

    points = make_points(rng, "doc-a", "/a", 40)
    seen: list[tuple[bool, str]] = []

    def optimize(directory: Path) -> bool:
        # What the child process gets: a copy outside the collection, and a store anyone may open.
        seen.append((_lock_is_free(tmp_path), Path(directory).name))
        with EdgeVectorIndex(tmp_path) as other:
            assert [h.id for h in other.search("c", points[3].vector, limit=1)] == [points[3].id]
        return edge_optimize.optimize_shard(directory) or True

    monkeypatch.setattr(edge_optimize, "optimize_in_child", optimize)
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", points)
        before = [h.id for h in index.search("c", points[9].vector, limit=5)]
        assert index.build_search_index("c")
        assert seen == [(True, f".build-c-{os.getpid()}")]
        assert index.count("c") == 40
        assert [h.id for h in index.search("c", points[9].vector, limit=5)] == before
        assert index.list_collections() == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".build", ".old"))) == []


def test_edge_drops_a_built_copy_when_the_collection_was_written_meanwhile(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanqa.retriever.index import edge_optimize

    points = make_points(rng, "doc-a", "/a", 30)
    late = make_points(rng, "doc-b", "/b", 1)

    def optimize(directory: Path) -> bool:
        with EdgeVectorIndex(tmp_path) as other:  # another ingest gets in while the graph is built
            other.upsert("c", late)
        return True

    monkeypatch.setattr(edge_optimize, "optimize_in_child", optimize)
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", points)
        with pytest.raises(VectorIndexError, match="written while its graph was built"):
            index.build_search_index("c")
        assert index.count("c") == 31  # the write that came meanwhile is kept, not the stale copy
        assert index.search("c", late[0].vector, limit=1)[0].id == late[0].id
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build")]


def test_edge_finishes_a_swap_interrupted_between_its_renames(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    points = make_points(rng, "doc-a", "/a", 5)
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", points)
    (tmp_path / "c").rename(tmp_path / ".old-c")  # the first rename done, the second not
    with EdgeVectorIndex(tmp_path) as index:
        assert index.list_collections() == ["c"] and index.count("c") == 5
    assert not (tmp_path / ".old-c").exists()


def test_edge_build_failure_leaves_the_collection(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanqa.retriever.index import edge_optimize

    def fail(directory: Path) -> bool:
        raise RuntimeError("qdrant_edge: out of memory")

    monkeypatch.setattr(edge_optimize, "optimize_in_child", fail)
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", make_points(rng, "doc-a", "/a", 5))
        with pytest.raises(VectorIndexError, match="search index of 'c': qdrant_edge: out of memory"):
            index.build_search_index("c")
        assert index.count("c") == 5
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build")]


def test_edge_build_runs_edge_in_a_child_process(tmp_path: Path, rng: np.random.Generator) -> None:
    # Too few vectors for Edge to build a graph: the child says so, the copy goes, the collection stays.
    with EdgeVectorIndex(tmp_path) as index:
        index.ensure_collection("c", DIM)
        index.upsert("c", make_points(rng, "doc-a", "/a", 5))
        assert index.build_search_index("c") is False
        assert index.count("c") == 5
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".writes")) == [
        EDGE_LOCK_FILE,
        "c",
    ]


def test_edge_lends_the_store_to_a_waiting_process_and_keeps_it_open_otherwise(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    from spanqa.retriever.index.edge import WAITING_FRESH_S, WAITING_PREFIX

    points = make_points(rng, "doc-a", "/a", 20)
    with EdgeVectorIndex(tmp_path, wait_s=30) as writer:
        writer.ensure_collection("c", DIM)
        writer.upsert("c", points[:10])
        writer.lend_when_asked()
        time.sleep(0.5)  # nobody waits: the store stays held (an ingest's collection stays open)
        assert not _lock_is_free(tmp_path)
        # A stale note of a process that died waiting is ignored, and cleared.
        stale = tmp_path / f"{WAITING_PREFIX}999999-1"
        stale.touch()
        os.utime(stale, (time.time() - 2 * WAITING_FRESH_S,) * 2)
        time.sleep(0.5)
        assert not _lock_is_free(tmp_path) and not stale.exists()
        started = time.monotonic()
        with EdgeVectorIndex(tmp_path, wait_s=30) as reader:  # waits: the writer gives the store back
            assert time.monotonic() - started < 10
            assert reader.count("c") == 10  # what was written before it got the store
            took_back: list[float] = []

            def write_more() -> None:  # the writer's next call waits for the reader to finish
                writer.upsert("c", points[10:])
                took_back.append(time.monotonic())

            thread = threading.Thread(target=write_more)
            thread.start()
            time.sleep(0.5)
            assert not took_back and reader.count("c") == 10
            closed = time.monotonic()
        thread.join(timeout=30)
        assert took_back and took_back[0] >= closed
        assert writer.count("c") == 20
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(WAITING_PREFIX)] == []


def test_server_int8_collection_keeps_vectors_and_bm25_index_on_disk(rng: np.random.Generator) -> None:
    from spanqa.retriever.lexical import Bm25Encoder

    vectors = unit_vectors(rng, 50, 32)
    points = make_points(rng, "doc-a", "/a", len(vectors), vectors=vectors)
    bm25 = Bm25Encoder()
    terms = bm25.document("work_mem default")
    points[7] = IndexPoint(points[7].id, points[7].vector, points[7].payload, terms)
    with ServerVectorIndex(":memory:", quantization="int8") as index:
        index.ensure_collection("q", 32)
        index.upsert("q", points)
        assert index.search("q", vectors[3], limit=1)[0].id == points[3].id
        assert [h.id for h in index.search_lexical("q", bm25.query("work_mem"), limit=3)] == [points[7].id]
        params = index._client.get_collection("q").config.params
        assert params.vectors.on_disk and params.sparse_vectors["lexical"].index.on_disk
    with ServerVectorIndex(":memory:") as plain:
        plain.ensure_collection("p", 32)
        sparse = plain._client.get_collection("p").config.params.sparse_vectors["lexical"]
        assert not (sparse.index and sparse.index.on_disk)


def _rss_anon_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("RssAnon:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_return_freed_memory_hands_freed_heap_pages_back() -> None:
    import ctypes

    from spanqa.retriever.index.edge import return_freed_memory

    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 (glibc only)
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    # 120 MB in small blocks (below mmap's threshold: from the heap), all freed but the last, which keeps the
    # freed pages below the heap's top, where free() itself never gives them back.
    blocks = [libc.malloc(4096) for _ in range(30_000)]
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    for block in blocks[:-1]:
        libc.free(block)
    held = _rss_anon_mb()
    return_freed_memory()
    assert _rss_anon_mb() < held - 80
    libc.free(blocks[-1])
