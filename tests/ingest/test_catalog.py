"""The SQL catalog on SQLite and PostgreSQL: documents, chunks, index versions, jobs, migrations, races.

The PostgreSQL half needs a server: ``DATABASE_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``);
each test gets a schema of its own (``search_path`` in the URL), dropped afterwards. Without a server those
tests are skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from spanqa.ingest.catalog import Base, Catalog, CatalogError, document_id_for, make_engine
from spanqa.ingest.db import display_url
from spanqa.ingest.migrations import (
    BASELINE_REVISION,
    CATALOG_TABLES,
    SchemaTooNewError,
    current_revision,
    head_revision,
    upgrade,
)
from spanqa.types import Chunk, Document, DocumentStatus, IndexStatus

# Fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'catalog.sqlite3'}"
    return str(request.getfixturevalue("postgres_schema_url"))


@pytest.fixture
def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


@pytest.fixture
def catalog(url: str) -> Iterator[Catalog]:
    opened = Catalog(url)
    yield opened
    opened.close()


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    made = make_engine(url)
    yield made
    made.dispose()


def make_document(path: str = "/data/notes/a.txt", text_: str = "", *, pages: bool = False) -> Document:
    body = text_ or "Warsaw is the capital of Poland. It stands on the Vistula River. Café 東京 🙂."
    return Document(
        id=document_id_for(path),
        path=path,
        relative_path=path.rsplit("/", 1)[-1],
        sha256="ab" * 32,
        size=len(body.encode()),
        mtime=1700000000.5,
        format="pdf" if pages else "txt",
        page_count=2 if pages else None,
        text=body,
        page_starts=[(1, 0), (2, 30)] if pages else [],
    )


def make_chunks(document: Document, size: int = 20) -> list[Chunk]:
    out = []
    for ordinal, start in enumerate(range(0, len(document.text), size)):
        end = min(start + size, len(document.text))
        piece = document.text[start:end]
        out.append(
            Chunk(
                id=Chunk.make_id(document.id, ordinal, piece),
                document_id=document.id,
                ordinal=ordinal,
                char_start=start,
                char_end=end,
                text=piece,
                page=document.page_at(start),
            )
        )
    return out


def run_threads(count: int, work: Callable[[int], Any]) -> list[BaseException]:
    """Run ``work(i)`` in ``count`` threads released together; the exceptions they raised."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return errors


# Documents and chunks ---------------------------------------------------------------------------------------


def test_save_and_read_documents(catalog: Catalog) -> None:
    doc = make_document(pages=True)
    chunks = make_chunks(doc)
    catalog.save_indexed(doc, chunks)
    other = make_document("/data/notes/b.txt", "Second file.")
    catalog.save_indexed(other, make_chunks(other))

    got = catalog.get_document(doc.id)
    assert got is not None
    assert got.text == doc.text and got.status == DocumentStatus.INDEXED and got.error is None
    assert got.page_starts == [(1, 0), (2, 30)] and got.page_count == 2 and got.num_chunks == len(chunks)
    assert got.mtime == doc.mtime and got.sha256 == doc.sha256 and got.created_at is not None
    assert catalog.get_document(doc.id, with_text=False).text == ""  # type: ignore[union-attr]
    assert catalog.get_document("missing") is None
    by_path = catalog.get_document_by_path(doc.path)
    assert by_path is not None and by_path.id == doc.id and by_path.text == ""

    assert [d.path for d in catalog.list_documents()] == [doc.path, other.path]
    assert catalog.list_documents(status=DocumentStatus.FAILED) == []
    assert {d.id for d in catalog.documents_by_id([other.id, "nope"])} == {other.id}
    assert {d.id for d in catalog.paths_under("/data/notes/")} == {doc.id, other.id}
    assert catalog.paths_under("/data/no") == []
    assert catalog.page_starts([doc.id, other.id]) == {doc.id: [(1, 0), (2, 30)]}

    for reference in (doc.id, doc.id[:8], doc.path, doc.relative_path):
        assert [d.id for d in catalog.find_documents(reference)] == [doc.id], reference
    assert catalog.find_documents(doc.id[:3]) == []  # a prefix counts from 6 characters

    stored = catalog.chunks_of(doc.id)
    assert stored == chunks
    assert all(doc.text[c.char_start : c.char_end] == c.text for c in stored)
    assert catalog.get_chunks([chunks[1].id, "missing"]) == {chunks[1].id: chunks[1]}
    assert catalog.chunk_ids() == {c.id for c in chunks} | {c.id for c in catalog.chunks_of(other.id)}
    assert sum(len(batch) for batch in catalog.iter_chunks(batch_size=2)) == len(catalog.chunk_ids())
    assert catalog.counts() == {"indexed": 2, "failed": 0, "deleted": 0, "chunks": len(catalog.chunk_ids())}


def test_save_indexed_replaces_chunks(catalog: Catalog) -> None:
    doc = make_document()
    catalog.save_indexed(doc, make_chunks(doc, size=10))
    created = catalog.get_document(doc.id)
    changed = make_document(text_="A shorter new text.")
    catalog.save_indexed(changed, make_chunks(changed, size=10))
    got = catalog.get_document(doc.id)
    assert got is not None and created is not None
    assert got.text == "A shorter new text." and got.num_chunks == 2
    assert got.created_at == created.created_at
    assert [c.text for c in catalog.chunks_of(doc.id)] == ["A shorter ", "new text."]
    assert catalog.counts()["chunks"] == 2


def test_record_failure_drops_an_indexed_version(catalog: Catalog) -> None:
    doc = make_document()
    catalog.save_indexed(doc, make_chunks(doc))
    assert catalog.record_failure(path=doc.path, relative_path=doc.relative_path, error="cannot read") is True
    got = catalog.get_document(doc.id)
    assert got is not None and got.status == DocumentStatus.FAILED and got.text == ""
    assert got.error == "cannot read" and got.num_chunks == 0
    assert catalog.chunks_of(doc.id) == []
    assert catalog.record_failure(path=doc.path, relative_path=doc.relative_path, error="again") is False

    new_path = "/data/notes/broken.pdf"
    assert catalog.record_failure(path=new_path, relative_path="broken.pdf", error="bad pdf", size=7) is False
    failed = catalog.get_document(document_id_for(new_path))
    assert failed is not None and failed.status == DocumentStatus.FAILED and failed.error == "bad pdf"
    assert failed.size == 7 and failed.num_chunks == 0
    assert catalog.record_failure(path=new_path, relative_path="broken.pdf", error="still bad") is False
    assert catalog.get_document(document_id_for(new_path)).error == "still bad"  # type: ignore[union-attr]
    assert catalog.counts()["failed"] == 2  # both: the dropped version and the file that never loaded


def test_mark_deleted(catalog: Catalog) -> None:
    doc = make_document()
    catalog.save_indexed(doc, make_chunks(doc))
    catalog.mark_deleted(doc.id)
    got = catalog.get_document(doc.id)
    assert got is not None and got.status == DocumentStatus.DELETED and got.text == "" and got.num_chunks == 0
    assert catalog.chunks_of(doc.id) == []
    assert catalog.paths_under("/data") == []
    assert catalog.counts() == {"indexed": 0, "failed": 0, "deleted": 1, "chunks": 0}
    catalog.save_indexed(doc, make_chunks(doc))  # the file came back
    assert catalog.get_document(doc.id).status == DocumentStatus.INDEXED  # type: ignore[union-attr]


def test_a_document_cannot_hold_two_chunks_at_one_ordinal(catalog: Catalog) -> None:
    doc = make_document()
    first, second = make_chunks(doc)[:2]
    clash = Chunk(
        id=second.id,
        document_id=doc.id,
        ordinal=first.ordinal,
        char_start=second.char_start,
        char_end=second.char_end,
        text=second.text,
    )
    with pytest.raises(IntegrityError):
        catalog.save_indexed(doc, [first, clash])
    assert catalog.get_document(doc.id) is None  # the whole transaction was rolled back


def test_deleting_a_document_row_cascades_to_its_chunks(catalog: Catalog) -> None:
    doc = make_document()
    catalog.save_indexed(doc, make_chunks(doc))
    with catalog.engine.begin() as connection:
        connection.execute(text("DELETE FROM documents WHERE id = :id"), {"id": doc.id})
    assert catalog.chunk_ids() == set()


# Index versions -------------------------------------------------------------------------------------------


def active_ids(catalog: Catalog) -> list[int]:
    return [v.id for v in catalog.index_versions() if v.status == IndexStatus.ACTIVE]


def test_index_versions(catalog: Catalog) -> None:
    assert catalog.active_index() is None
    first = catalog.create_index_version(model_name="m1", dimension=8, collection="c1", active=True)
    assert first.status == IndexStatus.ACTIVE and first.created_at is not None
    building = catalog.create_index_version(model_name="m2", dimension=16, collection="c2", active=False)
    assert building.status == IndexStatus.BUILDING
    active = catalog.active_index()
    assert active is not None and active.id == first.id and active.collection == "c1"

    catalog.activate_index_version(building.id)
    assert active_ids(catalog) == [building.id]
    assert [v.status for v in catalog.index_versions()] == [IndexStatus.RETIRED, IndexStatus.ACTIVE]

    third = catalog.create_index_version(model_name="m3", dimension=4, collection="c3", active=True)
    assert active_ids(catalog) == [third.id]  # creating an active version retires the old one

    # The same collection for the same model is the same version (two workers creating the first one).
    again = catalog.create_index_version(model_name="m3", dimension=4, collection="c3", active=True)
    assert again.id == third.id and len(catalog.index_versions()) == 3
    with pytest.raises(CatalogError, match="already recorded"):
        catalog.create_index_version(model_name="other", dimension=4, collection="c3", active=False)


def test_the_database_refuses_a_second_active_version(catalog: Catalog) -> None:
    catalog.create_index_version(model_name="m", dimension=8, collection="c1", active=True)
    with pytest.raises(IntegrityError), catalog.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO index_versions (model_name, dimension, collection, status, created_at)"
                " VALUES ('m', 8, 'c2', 'active', CURRENT_TIMESTAMP)"
            )
        )


def test_concurrent_activations_leave_exactly_one_active(catalog: Catalog) -> None:
    versions = [
        catalog.create_index_version(model_name="m", dimension=8, collection=f"c{i}", active=False)
        for i in range(4)
    ]
    errors = run_threads(4, lambda i: catalog.activate_index_version(versions[i].id))
    assert errors == []
    assert len(active_ids(catalog)) == 1


def test_concurrent_first_collection(catalog: Catalog) -> None:
    """Two workers on an empty catalog both create the model's collection: one version, active."""
    errors = run_threads(
        3, lambda _: catalog.create_index_version(model_name="m", dimension=8, collection="m_8", active=True)
    )
    assert errors == []
    assert [(v.collection, v.status) for v in catalog.index_versions()] == [("m_8", IndexStatus.ACTIVE)]


# Jobs and watched folders -----------------------------------------------------------------------------------


def test_jobs(catalog: Catalog) -> None:
    job = catalog.create_job("ingest", {"paths": ["/data"]}, job_id="job-1")
    assert job.id == "job-1" and job.state == "pending" and job.arguments == {"paths": ["/data"]}
    other = catalog.create_job("sweep", {})
    assert len(other.id) == 32
    catalog.update_job("job-1", state="running", total=3)
    got = catalog.get_job("job-1")
    assert got is not None and got.state == "running" and got.total == 3
    assert catalog.get_job("missing") is None
    assert {j.id for j in catalog.list_jobs()} == {"job-1", other.id}
    assert len(catalog.list_jobs(limit=1)) == 1

    assert catalog.advance_job("job-1", done=1).state == "running"  # type: ignore[union-attr]
    assert catalog.advance_job("job-1", failed=1).state == "running"  # type: ignore[union-attr]
    finished = catalog.advance_job("job-1", done=1)
    assert finished is not None and finished.state == "failed" and (finished.done, finished.failed) == (2, 1)
    assert catalog.advance_job("missing", done=1) is None


def test_concurrent_advance_job_sums_and_finishes_once(catalog: Catalog) -> None:
    threads, per_thread = 6, 5
    catalog.create_job("ingest", {}, job_id="job")
    catalog.update_job("job", state="running", total=threads * per_thread)
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for _ in range(per_thread):
            job = catalog.advance_job("job", done=1)
            assert job is not None
            with lock:
                seen.append((job.done, job.state))

    assert run_threads(threads, work) == []
    job = catalog.get_job("job")
    assert job is not None and job.done == threads * per_thread and job.failed == 0 and job.state == "done"
    # Every report saw its own count (they took turns) and exactly the last one finished the job.
    assert sorted(done for done, _ in seen) == list(range(1, threads * per_thread + 1))
    assert [done for done, state in seen if state == "done"] == [threads * per_thread]


def test_watched_folders(catalog: Catalog) -> None:
    assert catalog.watched_folders() == []
    catalog.watch_folder("/data/b", include=["*.pdf"])
    catalog.watch_folder("/data/a")
    catalog.watch_folder("/data/b", include=["*.txt"], exclude=["tmp/*"])
    assert catalog.watched_folders() == [
        {"path": "/data/a", "include": [], "exclude": []},
        {"path": "/data/b", "include": ["*.txt"], "exclude": ["tmp/*"]},
    ]
    assert catalog.unwatch_folder("/data/a") is True
    assert catalog.unwatch_folder("/data/a") is False
    assert [f["path"] for f in catalog.watched_folders()] == ["/data/b"]


# Races on one document -------------------------------------------------------------------------------------


def test_concurrent_saves_of_one_document(catalog: Catalog) -> None:
    """Workers writing the same (new) document take turns: no error, and the chunks match the text."""
    path = "/data/race.txt"

    def work(i: int) -> None:
        for round_ in range(4):
            doc = make_document(path, f"Version {i}.{round_} of the file, long enough for a few chunks.")
            catalog.save_indexed(doc, make_chunks(doc, size=12 + i))

    assert run_threads(4, work) == []
    doc = catalog.get_document(document_id_for(path))
    assert doc is not None and doc.status == DocumentStatus.INDEXED
    chunks = catalog.chunks_of(doc.id)
    assert len(chunks) == doc.num_chunks
    assert "".join(c.text for c in chunks) == doc.text
    assert catalog.counts() == {"indexed": 1, "failed": 0, "deleted": 0, "chunks": len(chunks)}


def test_concurrent_failure_and_save_of_one_document(catalog: Catalog) -> None:
    path = "/data/flaky.txt"
    doc = make_document(path)

    def work(i: int) -> None:
        for _ in range(4):
            if i % 2:
                catalog.record_failure(path=path, relative_path="flaky.txt", error="boom")
            else:
                catalog.save_indexed(doc, make_chunks(doc))

    assert run_threads(4, work) == []
    got = catalog.get_document(doc.id)
    # Whichever came last wins, whole: indexed with all its chunks, or failed with none.
    assert got is not None
    if got.status == DocumentStatus.INDEXED:
        assert len(catalog.chunks_of(doc.id)) == got.num_chunks == len(make_chunks(doc))
    else:
        assert got.status == DocumentStatus.FAILED and catalog.chunks_of(doc.id) == [] and got.num_chunks == 0


# Migrations ----------------------------------------------------------------------------------------------


def schema_diff(engine: Engine) -> list[Any]:
    """What autogenerate would change to make the database match the models (nothing, when in step)."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return [d for d in compare_metadata(context, Base.metadata) if not _is_alembic_version(d)]


def _is_alembic_version(diff: Any) -> bool:
    return isinstance(diff, tuple) and len(diff) > 1 and getattr(diff[1], "name", None) == "alembic_version"


def test_upgrade_from_empty_gives_head(url: str, engine: Engine) -> None:
    assert current_revision(engine) is None
    upgrade(url)
    assert current_revision(engine) == head_revision() == "0008"
    assert set(inspect(engine).get_table_names()) >= CATALOG_TABLES
    assert schema_diff(engine) == []
    upgrade(url)  # nothing to do
    assert current_revision(engine) == head_revision()


def test_upgrade_from_the_previous_revision(url: str, engine: Engine) -> None:
    upgrade(engine, BASELINE_REVISION)
    assert current_revision(engine) == BASELINE_REVISION
    doc = make_document()
    with engine.begin() as connection:
        _insert_document(connection, doc)
        # Rows that break the rules 0002 brings, as racing writers of old versions could leave them.
        _insert_chunk(connection, "c-1", doc.id, ordinal=0, text_="War")
        _insert_chunk(connection, "c-2", doc.id, ordinal=0, text_="Warsaw")
        _insert_chunk(connection, "c-3", doc.id, ordinal=1, text_="saw")
        for n, status in enumerate(["active", "active", "building"]):
            connection.execute(
                text(
                    "INSERT INTO index_versions (model_name, dimension, collection, status, created_at)"
                    " VALUES ('m', 8, :collection, :status, CURRENT_TIMESTAMP)"
                ),
                {"collection": f"c{n}", "status": status},
            )

    catalog = Catalog(url)  # migrates on first use
    try:
        assert current_revision(engine) == head_revision()
        got = catalog.get_document(doc.id)
        assert got is not None and got.text == doc.text and got.path == doc.path
        assert [(c.id, c.ordinal) for c in catalog.chunks_of(doc.id)] == [("c-1", 0), ("c-3", 1)]
        assert got.sha256 == ""  # its duplicates were dropped: re-indexed by the next ingest
        assert [(v.collection, v.status) for v in catalog.index_versions()] == [
            ("c0", IndexStatus.RETIRED),
            ("c1", IndexStatus.ACTIVE),
            ("c2", IndexStatus.BUILDING),
        ]
        assert schema_diff(engine) == []
    finally:
        catalog.close()


@pytest.mark.parametrize(
    ("before", "cut_again"),
    [("0003", {"txt", "pdf"}), ("0006", {"html"})],
    ids=["unwrapped-text-and-pdf", "one-entry-per-html-term"],
)
def test_an_upgrade_that_changes_a_format_cuts_its_documents_again(
    url: str, engine: Engine, before: str, cut_again: set[str]
) -> None:
    upgrade(engine, before)
    docs = {fmt: make_document(path=f"/docs/a.{fmt}") for fmt in ("txt", "pdf", "md", "html")}
    with engine.begin() as connection:
        for fmt, doc in docs.items():
            _insert_document(connection, doc, fmt=fmt)
    catalog = Catalog(url)
    try:
        shas = {fmt: catalog.get_document(doc.id).sha256 for fmt, doc in docs.items()}  # type: ignore[union-attr]
        # Upgrading from before 0007 also runs 0007, which cuts html again.
        cleared = cut_again | ({"html"} if before < "0007" else set())
        assert shas == {fmt: "" if fmt in cleared else doc.sha256 for fmt, doc in docs.items()}
    finally:
        catalog.close()


def _insert_document(connection: Any, doc: Document, *, fmt: str = "txt") -> None:
    connection.execute(
        text(
            "INSERT INTO documents (id, path, relative_path, sha256, size, mtime, format, status, text,"
            " num_chunks, page_starts, created_at, updated_at) VALUES (:id, :path, :rel, :sha, 1, 0, :fmt,"
            " 'indexed', :text, 2, '[]', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
        ),
        {
            "id": doc.id,
            "path": doc.path,
            "rel": doc.relative_path,
            "sha": doc.sha256,
            "text": doc.text,
            "fmt": fmt,
        },
    )


def _insert_chunk(connection: Any, chunk_id: str, document_id: str, *, ordinal: int, text_: str) -> None:
    connection.execute(
        text(
            "INSERT INTO chunks (id, document_id, ordinal, char_start, char_end, text)"
            " VALUES (:id, :doc, :ordinal, 0, :end, :text)"
        ),
        {"id": chunk_id, "doc": document_id, "ordinal": ordinal, "end": len(text_), "text": text_},
    )


def test_a_newer_schema_is_refused(url: str, engine: Engine) -> None:
    Catalog(url).close()
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0999_from_the_future'"))
    with pytest.raises(SchemaTooNewError) as caught:
        Catalog(url)
    message = str(caught.value)
    assert isinstance(caught.value, CatalogError)
    assert "\n" not in message
    known = head_revision()
    assert (
        f"schema revision 0999_from_the_future, newer than this spanqa knows ({known}): upgrade spanqa"
        in message
    )
    assert display_url(url) in message
    with pytest.raises(SchemaTooNewError):
        upgrade(url)
    assert current_revision(engine) == "0999_from_the_future"  # left alone


@pytest.mark.parametrize("made_by", ["create_all", "revision 0001"])
def test_a_catalog_made_before_migrations_is_adopted(url: str, engine: Engine, made_by: str) -> None:
    if made_by == "create_all":
        Base.metadata.create_all(engine)
    else:  # the schema old code made, without the 0002 indexes
        upgrade(engine, BASELINE_REVISION)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE alembic_version"))
    doc = make_document()
    with engine.begin() as connection:
        _insert_document(connection, doc)
    assert current_revision(engine) is None

    catalog = Catalog(url)
    try:
        assert current_revision(engine) == head_revision()
        assert catalog.get_document(doc.id) is not None
        assert schema_diff(engine) == []
    finally:
        catalog.close()


def test_a_database_with_only_some_catalog_tables_is_refused(url: str, engine: Engine) -> None:
    Base.metadata.tables["documents"].create(engine)
    with pytest.raises(CatalogError, match="not a spanqa catalog") as caught:
        Catalog(url)
    assert "\n" not in str(caught.value)
    assert current_revision(engine) is None


def test_concurrent_first_open(url: str, engine: Engine) -> None:
    """Processes starting together on a fresh database: each opens it, one of them migrates."""
    opened: list[Catalog] = []

    def work(_: int) -> None:
        opened.append(Catalog(url))

    errors = run_threads(3, work)
    for catalog in opened:
        catalog.close()
    assert errors == []
    assert len(opened) == 3
    assert current_revision(engine) == head_revision()


def test_sqlite_uses_wal_and_a_busy_timeout(catalog: Catalog, is_sqlite: bool) -> None:
    if not is_sqlite:
        pytest.skip("SQLite only")
    with catalog.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_an_unreachable_database_is_a_one_line_catalog_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(CatalogError, match="cannot open the catalog") as caught:
        Catalog(f"sqlite:///{blocker / 'catalog.sqlite3'}")
    assert "\n" not in str(caught.value)


def test_the_file_names_of_revisions_name_the_head() -> None:
    # The fast path that skips alembic on an up-to-date catalog trusts the revision files' names.
    from spanqa.ingest.migrations import file_head_revision, head_revision

    assert file_head_revision() == head_revision()
