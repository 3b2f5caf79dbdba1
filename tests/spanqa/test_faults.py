"""Faults injected into a real `spanqa ingest` process: killed (SIGKILL) or interrupted (SIGINT) in the
middle of a folder. The end state is checked: every point has its chunk and every chunk its point once the
next run (or `spanqa doctor`) has repaired, no document is half indexed, and what was indexed before still
answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from spanqa import pipeline
from spanqa.ingest.catalog import Catalog
from spanqa.ingest.db import CatalogUnavailableError
from spanqa.ingest.job import IngestJob
from spanqa.retriever.encoder import SentenceEncoder
from spanqa.retriever.index import ServerVectorIndex, VectorIndexUnavailableError
from spanqa.retriever.index.edge import EdgeVectorIndex
from spanqa.runtime import Runtime
from spanqa.settings import Settings
from spanqa.types import DocumentStatus, SearchOptions

pytestmark = pytest.mark.slow

SENTENCE = "The Denver Broncos defeated the Carolina Panthers at Levi's Stadium in Santa Clara. "


def _spanqa(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "spanqa.cli", *args]
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def _consistent(settings: Settings) -> None:
    _consistent_catalog(settings)
    with Catalog(settings.catalog_url) as catalog:
        active = catalog.active_index()
        assert active is not None
        chunk_ids = catalog.chunk_ids()
    with EdgeVectorIndex(settings.qdrant_path) as index:
        assert index.point_ids(active.collection) == chunk_ids


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_an_ingest_stopped_mid_folder_is_repaired(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path, sig: int
) -> None:
    before = tmp_path / "before"
    before.mkdir()
    (before / "kept.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
    assert _spanqa(spanqa_env, "ingest", str(before)).returncode == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"part{i:02d}.txt").write_text(f"Part {i}. " + SENTENCE * 60)
    process = subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "ingest", str(docs)],
        env={**os.environ, **spanqa_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while True:  # stop it once it has indexed some of the folder, in the middle of the rest
            assert process.poll() is None, "the ingest finished before it could be stopped"
            with Catalog(settings.catalog_url) as catalog:
                if catalog.counts()[DocumentStatus.INDEXED.value] >= 3:
                    break
            assert time.time() < deadline
            time.sleep(0.05)
        process.send_signal(sig)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert code != 0  # a stopped run never claims success
    doctor = _spanqa(spanqa_env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr
    assert set(json.loads(doctor.stdout)) == {"orphans_removed", "missing_restored"}
    _consistent(settings)  # the doctor's repair leaves index and catalog in step
    found = json.loads(_spanqa(spanqa_env, "search", "capital of Poland", "--json").stdout)
    assert any(Path(p["path"]).name == "kept.txt" for p in found["passages"])  # indexed before: still there
    again = _spanqa(spanqa_env, "ingest", str(docs), "--json")  # the next run finishes the folder
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert summary["new"] + summary["unchanged"] == 30 and summary["failed"] == 0
    _consistent(settings)


def test_an_unreachable_database_is_a_one_line_error_with_the_password_masked(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from spanqa.cli import main

    env = {"SPANQA_DATABASE_URL": "postgresql+psycopg://app:hunter2@127.0.0.1:1/spanqa", "SPANQA_CONFIG": ""}
    for args in (["status"], ["ingest", str(tmp_path)], ["ask", "Who won?"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 2, result.output
        message = result.output.strip()
        assert message.startswith("error: cannot open the catalog") and "\n" not in message
        assert "hunter2" not in result.output and "app:***@" in message


# Faults injected into one process: the catalog's disk filling up, the catalog's database going away, the
# vector store going away, each in the middle of a folder. Each run stops with a one-line error; what was
# committed before stands; the repair (doctor's) and the next run bring catalog and store back in step.


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    before, docs = tmp_path / "before", tmp_path / "docs"
    before.mkdir()
    docs.mkdir()
    (before / "kept.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
    for i in range(12):
        (docs / f"part{i:02d}.txt").write_text(f"Part {i}. " + SENTENCE * 30)
    return before, docs


def _job(runtime: Runtime) -> IngestJob:
    job = runtime.ingest_job()
    job.encode_group = 1  # one file per batch: the fault strikes between files, as in a large folder
    return job


def _repaired_and_finished(settings: Settings, docs: Path, *, expect_orphans: bool) -> None:
    """The doctor's repair, then the next run: catalog and store agree and the old document answers."""
    with Runtime(settings) as runtime:
        job = runtime.ingest_job()
        removed = job.remove_orphans()
        assert job.restore_missing() == 0
        assert (removed > 0) == expect_orphans  # the points written before the failed commit
        found = pipeline.search(runtime, "capital of Poland", SearchOptions(top_k=3))
        assert any(Path(p.path).name == "kept.txt" for p in found.passages)
        report = job.run([docs])
        assert report.exit_code == 0 and report.summary()["failed"] == 0
        assert report.summary()["new"] + report.summary()["unchanged"] == 12
        assert runtime.index.point_ids(job.active_collection()) == runtime.catalog.chunk_ids()
    _consistent_catalog(settings)


def _consistent_catalog(settings: Settings) -> None:
    with Catalog(settings.catalog_url) as catalog:
        for document in catalog.list_documents(status=DocumentStatus.INDEXED):
            full = catalog.get_document(document.id)
            assert full is not None
            chunks = catalog.chunks_of(document.id)
            assert len(chunks) == full.num_chunks > 0  # never half indexed
            assert all(full.text[c.char_start : c.char_end] == c.text for c in chunks)


def test_a_full_disk_mid_ingest_is_a_one_line_error_and_loses_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    before, docs = _folders(tmp_path)
    with Runtime(settings) as runtime:
        assert _job(runtime).run([before]).exit_code == 0
        engine = runtime.catalog.engine
        with engine.connect() as connection:
            pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()

        # SQLite's page limit fails a write as a full disk does ("database or disk is full").
        @event.listens_for(engine, "connect")
        def small_disk(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 12}")

        engine.dispose()  # the connections open from now on have the limit
        with pytest.raises(CatalogUnavailableError) as failed:
            _job(runtime).run([docs])
        message = str(failed.value)
        assert message.startswith("the catalog at sqlite:///") and "database or disk is full" in message
        assert "\n" not in message
        indexed = runtime.catalog.counts()[DocumentStatus.INDEXED.value]
        assert 1 < indexed < 13  # stopped mid-folder, after the files it could commit
    _consistent_catalog(settings)
    _repaired_and_finished(settings, docs, expect_orphans=True)  # the disk has room again


@pytest.mark.integration
def test_the_database_going_away_mid_ingest_is_a_one_line_error_and_loses_nothing(
    settings: Settings, tmp_path: Path, postgres_schema_url: str
) -> None:
    settings = settings.replace(database_url=postgres_schema_url)
    before, docs = _folders(tmp_path)
    with Runtime(settings) as runtime:
        assert _job(runtime).run([before]).exit_code == 0
        engine = runtime.catalog.engine
        saved: list[int] = []

        # The server ends the session in the middle of a file's transaction (as a restart does).
        @event.listens_for(engine, "before_cursor_execute")
        def server_restart(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith("INSERT INTO chunks"):
                saved.append(1)
                if len(saved) == 5:  # a few files into the folder
                    cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

        with pytest.raises(CatalogUnavailableError) as failed:
            _job(runtime).run([docs])
        message = str(failed.value)
        assert message.startswith("the catalog at postgresql+psycopg://") and "\n" not in message
        event.remove(engine, "before_cursor_execute", server_restart)
        indexed = runtime.catalog.counts()[DocumentStatus.INDEXED.value]
        assert 1 < indexed < 13  # stopped mid-folder, after the files it could commit
    _repaired_and_finished(settings, docs, expect_orphans=True)


@pytest.mark.integration
def test_a_database_restart_between_commands_is_not_an_error(postgres_schema_url: str) -> None:
    """A pooled connection the server closed (a restart while serve or a worker idles) is replaced."""
    from sqlalchemy import create_engine

    with Catalog(postgres_schema_url) as catalog:
        assert catalog.counts()["chunks"] == 0
        with catalog.engine.connect() as connection:
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        admin = create_engine(postgres_schema_url)
        with admin.connect() as connection:
            assert connection.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})").scalar_one()
        admin.dispose()
        assert catalog.counts()["chunks"] == 0  # the pool's check found it dead and reconnected


def test_the_vector_store_going_away_mid_ingest_is_a_one_line_error_and_loses_nothing(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanqa.retriever.index import server as server_module

    monkeypatch.setattr(server_module, "RETRY_BASE_DELAY_S", 0.0)
    before, docs = _folders(tmp_path)
    # Server mode, on qdrant-client's local mode (the same client calls as a Qdrant server).
    index = ServerVectorIndex(":memory:")
    with Catalog(settings.catalog_url) as catalog:

        def job() -> IngestJob:
            made = IngestJob(
                catalog=catalog, encoder=SentenceEncoder(model=settings.retriever_model), index=index
            )
            made.encode_group = 1
            return made

        assert job().run([before]).exit_code == 0
        upsert = index._client.upsert
        calls: list[int] = []

        def unreachable(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) > 3:  # three files in, the server stops answering
                raise ConnectionRefusedError(111, "Connection refused")
            return upsert(*args, **kwargs)

        monkeypatch.setattr(index._client, "upsert", unreachable)
        with pytest.raises(VectorIndexUnavailableError) as failed:
            job().run([docs])
        assert str(failed.value).startswith("cannot reach the Qdrant server") and "\n" not in str(
            failed.value
        )
        indexed = catalog.counts()[DocumentStatus.INDEXED.value]
        assert 1 < indexed < 13  # stopped mid-folder, after the files it could write
        monkeypatch.setattr(index._client, "upsert", upsert)  # back
        again = job()
        assert again.remove_orphans() == 0 and again.restore_missing() == 0  # nothing was half written
        hits = again.run([docs])
        assert hits.summary()["new"] + hits.summary()["unchanged"] == 12 and hits.exit_code == 0
        assert index.point_ids(again.active_collection()) == catalog.chunk_ids()
    index.close()
    _consistent_catalog(settings)


def test_watch_without_a_broker_ingests_changes_and_stops_cleanly(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "first.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
    env = {k: v for k, v in spanqa_env.items() if k != "SPANQA_BROKER_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "watch", str(docs)],
        env={**{k: v for k, v in os.environ.items() if k != "SPANQA_BROKER_URL"}, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def indexed() -> set[str]:
        if not settings.data_dir.exists():
            return set()
        with Catalog(settings.catalog_url) as catalog:
            return {Path(d.path).name for d in catalog.list_documents(status=DocumentStatus.INDEXED)}

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.time() + 120
        while not condition():
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.time() < deadline
            time.sleep(0.2)

    try:
        wait_for(lambda: indexed() == {"first.txt"})
        (docs / "second.txt").write_text(SENTENCE * 3)
        wait_for(lambda: indexed() == {"first.txt", "second.txt"})
        (docs / "first.txt").unlink()
        wait_for(lambda: indexed() == {"second.txt"})
        # Between runs the store is free: another spanqa command answers from it meanwhile.
        found = _spanqa(spanqa_env, "search", "Broncos", "--json")
        assert found.returncode == 0, found.stderr
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "stopped watching" in output and "1 new" in output and "1 removed" in output
    _consistent(settings)


def test_the_cli_asks_ingests_and_removes_through_a_running_server_on_the_same_folder(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path
) -> None:
    import socket
    import urllib.request

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "game.txt").write_text(SENTENCE * 3)
    assert _spanqa(spanqa_env, "ingest", str(docs)).returncode == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "serve", "--port", str(port)],
        env={**os.environ, **spanqa_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if json.loads(response.read())["models_loaded"]:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "the server did not start"
            time.sleep(0.3)
        assert settings.server_file.is_file()
        # The server holds the store; the CLI on the same folder asks through it instead of failing.
        asked = _spanqa(spanqa_env, "ask", "Who won the game?", "--json", "--min-score", "0")
        assert asked.returncode == 0, asked.stderr
        answers = json.loads(asked.stdout)["answers"]
        assert answers and all(a["path"].endswith("game.txt") for a in answers)
        found = _spanqa(spanqa_env, "search", "Broncos", "--json")
        assert found.returncode == 0 and json.loads(found.stdout)["passages"], found.stderr
        # Ingest and removal go through it too: the report is the one a local ingest prints.
        (docs / "capital.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
        (docs / "empty.txt").write_text("")
        ingested = _spanqa(spanqa_env, "ingest", str(docs), "--json")
        assert ingested.returncode == 0, ingested.stderr
        report = json.loads(ingested.stdout)
        assert report["summary"] == {"new": 1, "changed": 0, "unchanged": 1, "failed": 0, "pruned": 0}
        assert [f["path"] for f in report["skipped_files"]] == [str(docs / "empty.txt")]
        asked = _spanqa(spanqa_env, "ask", "What is the capital of Poland?", "--json", "--min-score", "0")
        assert json.loads(asked.stdout)["answers"][0]["path"].endswith("capital.txt"), asked.stdout
        missing = _spanqa(spanqa_env, "ingest", str(tmp_path / "nowhere"))
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
        removed = _spanqa(spanqa_env, "docs", "remove", str(docs / "game.txt"))
        assert removed.returncode == 0 and "removed" in removed.stdout, removed.stderr
        found = _spanqa(spanqa_env, "search", "Broncos", "--json")
        assert all(p["path"].endswith("capital.txt") for p in json.loads(found.stdout)["passages"])
        status = _spanqa(spanqa_env, "status", "--json")
        assert status.returncode == 0, status.stderr
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    assert not settings.server_file.exists()  # the address goes with the server
    _consistent(settings)


def test_ask_and_remove_work_while_a_big_folder_ingests(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path
) -> None:
    before = tmp_path / "before"
    before.mkdir()
    (before / "kept.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
    (before / "gone.txt").write_text("Oslo is the capital of Norway. It lies on a fjord. " * 3)
    assert _spanqa(spanqa_env, "ingest", str(before)).returncode == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(150):  # long enough to ask and remove while it runs, on a fast machine too
        (docs / f"part{i:03d}.txt").write_text(f"Part {i}. " + SENTENCE * 80)
    env = {**spanqa_env, "SPANQA_STORE_WAIT_S": "60"}
    ingest = subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "ingest", str(docs)],
        # Its end builds the search index on a copy while the questions go on.
        env={**os.environ, **env, "SPANQA_HNSW_BUILD_AT": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    asked_meanwhile, removed = 0, None
    try:
        while ingest.poll() is None:
            # A question while the ingest runs: answered from what is committed so far, never refused.
            asked = _spanqa(env, "ask", "What is the capital of Poland?", "--json", "--min-score", "0")
            assert asked.returncode == 0, asked.stderr
            running = ingest.poll() is None
            asked_meanwhile += running
            with Catalog(settings.catalog_url) as catalog:
                for answer in json.loads(asked.stdout)["answers"]:
                    document = catalog.get_document(answer["document_id"])
                    assert document is not None
                    assert document.text[answer["char_start"] : answer["char_end"]] == answer["text"]
            if removed is None and running:
                removed = _spanqa(env, "docs", "remove", str(before / "gone.txt"))
                assert removed.returncode == 0, removed.stderr
        output, errors = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert ingest.returncode == 0, errors
    assert asked_meanwhile >= 1 and removed is not None  # the checks above ran while the ingest did
    assert "150 new" in output
    _consistent(settings)
    doctor = _spanqa(env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    with Catalog(settings.catalog_url) as catalog:
        indexed = {Path(d.path).name for d in catalog.list_documents(status=DocumentStatus.INDEXED)}
    assert "gone.txt" not in indexed and {"kept.txt", "part000.txt", "part149.txt"} <= indexed


def test_two_ingests_of_one_folder_take_turns(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(40):
        (docs / f"part{i:02d}.txt").write_text(f"Part {i}. " + SENTENCE * 80)
    env = {**os.environ, **spanqa_env, "SPANQA_STORE_WAIT_S": "120"}
    command = [sys.executable, "-m", "spanqa.cli", "ingest", str(docs), "--json"]
    both = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    both.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    reports = []
    for process in both:
        output, errors = process.communicate(timeout=300)
        assert process.returncode == 0, errors
        reports.append(json.loads(output)["summary"])
    # Each file is indexed once, by either run; nothing is half indexed or duplicated.
    assert sum(r["new"] + r["changed"] for r in reports) >= 40 and all(r["failed"] == 0 for r in reports)
    _consistent(settings)
    with Catalog(settings.catalog_url) as catalog:
        assert len(catalog.list_documents(status=DocumentStatus.INDEXED)) == 40
