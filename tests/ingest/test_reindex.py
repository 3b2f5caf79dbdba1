from __future__ import annotations

import threading
from pathlib import Path

import pytest

from spanqa import pipeline
from spanqa.ingest.reindex import reindex
from spanqa.retriever.index import VectorIndexError
from spanqa.runtime import Runtime
from spanqa.settings import Settings
from spanqa.types import SearchOptions


def test_reindex_switches_atomically_while_questions_keep_being_answered(
    settings: Settings, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"d{i}.txt").write_text(
            f"Document {i}: the Denver Broncos won Super Bowl 50 in Santa Clara. " * 15
        )
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        before = runtime.catalog.active_index()
        assert before is not None
        answered: list[int] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def ask_in_a_loop() -> None:
            while not stop.is_set():
                try:
                    result = pipeline.search(runtime, "Who won Super Bowl 50?", SearchOptions(top_k=3))
                    answered.append(len(result.passages))
                except BaseException as exc:  # any failure fails the test
                    errors.append(exc)

        thread = threading.Thread(target=ask_in_a_loop)
        thread.start()
        try:
            reports = [
                reindex(catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index)
                for _ in range(2)
            ]
        finally:
            stop.set()
            thread.join(timeout=30)
        assert errors == []
        assert answered and all(n == 3 for n in answered)
        after = runtime.catalog.active_index()
        assert after is not None and after.collection == reports[-1].current.collection != before.collection
        assert [v.status.value for v in runtime.catalog.index_versions()] == ["retired", "retired", "active"]
        assert runtime.index.point_ids(after.collection) == runtime.catalog.chunk_ids()
        assert runtime.index.alias_target("spanqa_active") == after.collection
        # The first collection is dropped at the second rebuild; the one just replaced stays for searches.
        assert not runtime.index.has_collection(before.collection)
        assert runtime.index.has_collection(reports[-1].previous.collection)  # type: ignore[union-attr]
        # Ingest after a rebuild writes into the new collection.
        (docs / "new.txt").write_text("A new document about Warsaw and the Vistula river. " * 10)
        runtime.ingest_job().run([docs])
        assert runtime.index.point_ids(after.collection) == runtime.catalog.chunk_ids()


def test_reindex_rebuilds_dense_and_lexical_vectors(settings: Settings, tmp_path: Path) -> None:
    from spanqa.retriever.lexical import Bm25Encoder

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "config.md").write_text("# Memory\n\n## work_mem\n\nThe default is four megabytes (4MB).\n")
    (docs / "river.txt").write_text("Warsaw stands on the Vistula river.")
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        report = reindex(catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index)
        collection = report.current.collection
        assert runtime.index.has_lexical(collection)
        hits = runtime.index.search_lexical(collection, Bm25Encoder().query("work_mem default"), limit=5)
        assert [h.payload["path"].endswith("config.md") for h in hits] == [True]
        runtime.settings = settings.replace(retrieval="lexical")  # the tiny random encoder ranks anything
        lexical = pipeline.search(runtime, "work_mem", SearchOptions(top_k=1))
        assert lexical.passages[0].heading == "Memory > work_mem"


def test_a_pooling_change_is_refused_until_reindexed(settings: Settings, tmp_path: Path) -> None:
    from spanqa.ingest.model_check import ModelMismatchError

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Denver Broncos won Super Bowl 50 at Levi's Stadium.")
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        assert runtime.catalog.active_index().pooling == "auto"  # type: ignore[union-attr]
    cls = settings.replace(pooling="cls")
    with Runtime(cls) as runtime:
        with pytest.raises(ModelMismatchError, match="built with pooling 'auto' but SPANQA_POOLING is 'cls'"):
            pipeline.search(runtime, "Who won?")
        with pytest.raises(ModelMismatchError, match="spanqa reindex"):
            runtime.ingest_job().run([docs])
        report = reindex(catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index)
        assert report.previous is not None and report.current.pooling == "cls"
        assert report.current.collection != report.previous.collection
        assert pipeline.search(runtime, "Who won?").passages  # answered from the cls-pooled vectors


def test_a_reindex_makes_the_new_collection_in_the_layout_now_set(settings: Settings, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "river.txt").write_text("Warsaw stands on the Vistula river. Kraków stands on the Vistula too.")
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        before = runtime.catalog.active_index()
        assert before is not None
    with Runtime(settings.replace(vector_quantization="int8")) as runtime:
        # Only new collections take the setting: the one made before answers as it was made.
        config = settings.qdrant_path / before.collection / "edge_config.json"
        assert "int8" not in config.read_text().lower()
        report = reindex(catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index)
        made = settings.qdrant_path / report.current.collection / "edge_config.json"
        assert '"scalar":{"type":"int8"' in made.read_text().replace(" ", "").lower()
        runtime.settings = runtime.settings.replace(retrieval="dense")
        found = pipeline.search(runtime, "Which river?", SearchOptions(top_k=2))
        assert {p.path.endswith("river.txt") for p in found.passages} == {True}


def test_a_big_reindex_builds_the_new_collections_graph_before_the_switch(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"f{i}.txt").write_text(f"File {i} says the answer is {i * 7}.")
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        before = runtime.catalog.active_index()
        built: list[tuple[str, str | None]] = []  # (collection built, the active one then)

        def build(name: str) -> bool:
            active = runtime.catalog.active_index()
            built.append((name, active.collection if active else None))
            return True

        monkeypatch.setattr(runtime.index, "build_search_index", build)
        told: list[int] = []
        report = reindex(
            catalog=runtime.catalog,
            encoder=runtime.encoder,
            index=runtime.index,
            hnsw_build_at=6,
            on_build=told.append,
        )
        assert before is not None and told == [6] and report.index_build_note is None
        assert built == [(report.current.collection, before.collection)]  # built while the old one answered
        small = reindex(
            catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index, hnsw_build_at=7
        )
        assert len(built) == 1 and small.index_build_seconds == 0.0  # fewer vectors than the setting

        def refuse(name: str) -> bool:
            raise VectorIndexError("disk full")

        monkeypatch.setattr(runtime.index, "build_search_index", refuse)
        failed = reindex(
            catalog=runtime.catalog, encoder=runtime.encoder, index=runtime.index, hnsw_build_at=1
        )
        # The switch happens all the same: search without the graph is exact, only slower.
        assert runtime.catalog.active_index().collection == failed.current.collection  # type: ignore[union-attr]
        assert "disk full" in (failed.index_build_note or "")
