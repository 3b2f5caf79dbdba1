"""A real worker process on a real Redis: background ingest, idempotency, a SIGKILL mid-file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from spanqa.cli import main
from spanqa.ingest.catalog import Catalog
from spanqa.retriever.index import EdgeVectorIndex
from spanqa.settings import Settings
from spanqa.types import DocumentStatus

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_url() -> Iterator[str]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS_URL} (set REDIS_URL, or run scripts/test.sh which starts one)")
    client.flushdb()
    yield REDIS_URL
    client.flushdb()


@pytest.fixture
def worker_env(spanqa_env: dict[str, str], redis_url: str) -> dict[str, str]:
    return {
        **os.environ,
        **spanqa_env,
        "SPANQA_BROKER_URL": redis_url,
        # Redis delivers a task again once it has run past this timeout, by design, and a file redelivered
        # while it still runs counts twice in its job: every task here must end well inside it, even on a
        # slow, shared machine (a minute; the default is an hour). The killed-worker test shortens it.
        "SPANQA_BROKER_VISIBILITY_TIMEOUT_S": "60",
        "SPANQA_DOCUMENT_LOCK_TIMEOUT_S": "3",
    }


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "worker", "--concurrency", "1", "--loglevel", "INFO"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def enqueue(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(
        main, ["ingest", "--background", "--json", *args], env=env, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["job_id"])


def wait_for_job(catalog: Catalog, job_id: str, log: Path, timeout: float = 180) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = catalog.get_job(job_id)
        if job is not None and job.state in {"done", "failed"}:
            return job.state
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish; worker log:\n{log.read_text()[-3000:]}")


def assert_points_match_chunks(settings: Settings, catalog: Catalog) -> None:
    active = catalog.active_index()
    assert active is not None
    with EdgeVectorIndex(settings.qdrant_path) as index:
        assert index.point_ids(active.collection) == catalog.chunk_ids()


def test_background_ingest_through_a_worker_is_idempotent(
    settings: Settings, worker_env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"doc{i}.txt").write_text(
            f"Document {i} talks about the Denver Broncos and Santa Clara. " * 20
        )
    log = tmp_path / "worker.log"
    process = start_worker(worker_env, log)
    catalog = Catalog(settings.catalog_url)
    try:
        first = enqueue(worker_env, str(docs))
        assert wait_for_job(catalog, first, log) == "done"
        job = catalog.get_job(first)
        assert job is not None and (job.total, job.done, job.failed) == (4, 4, 0)
        # The same folder twice more, at once: still one document per file, no duplicate points.
        again = [enqueue(worker_env, str(docs)), enqueue(worker_env, str(docs))]
        for job_id in again:
            assert wait_for_job(catalog, job_id, log) == "done"
        assert len(catalog.list_documents(status=DocumentStatus.INDEXED)) == 4
        result = CliRunner().invoke(main, ["jobs", first, "--json"], env=worker_env)
        assert json.loads(result.stdout)["state"] == "done"
        # The worker owns the embedded store: a command that must open it is told so at once, in one line.
        started = time.time()
        inline_env = {k: v for k, v in worker_env.items() if k != "SPANQA_BROKER_URL"}
        inline_env["SPANQA_STORE_WAIT_S"] = "1"  # a worker never gives the store back: waiting is in vain
        result = CliRunner().invoke(main, ["search", "Broncos"], env=inline_env)
        assert result.exit_code == 2 and "in use by another spanqa process" in result.output
        assert len(result.output.strip().splitlines()) == 1 and time.time() - started < 30
        # With the broker, search runs on the worker instead.
        result = CliRunner().invoke(main, ["search", "Broncos", "--json"], env=worker_env)
        assert result.exit_code == 0, result.output
        found = json.loads(result.stdout)["passages"]
        assert found and [p["rank"] for p in found] == list(range(1, len(found) + 1))
        # A question is not refused: it runs on the worker that holds the store, and comes back whole.
        result = CliRunner().invoke(main, ["ask", "Who talks about Santa Clara?", "--json"], env=worker_env)
        assert result.exit_code == 0, result.output
        asked = json.loads(result.stdout)
        assert asked["question"] == "Who talks about Santa Clara?" and asked["passages"]
        texts = {p.name: p.read_text() for p in docs.iterdir()}
        for answer in asked["answers"]:
            text = texts[Path(answer["path"]).name]
            assert text[answer["char_start"] : answer["char_end"]] == answer["text"]
        assert {"encode", "search", "read"} <= set(asked["timings_ms"])
        # The stdin loop goes through the worker too, one JSON line per question.
        result = CliRunner().invoke(
            main, ["ask", "-", "--json"], input="Broncos?\nSanta Clara?\n", env=worker_env
        )
        assert result.exit_code == 0, result.output
        assert [json.loads(line)["question"] for line in result.output.splitlines()] == [
            "Broncos?",
            "Santa Clara?",
        ]
        # A foreground ingest runs as a job on the worker and is followed to its end; removal goes there too.
        (docs / "doc4.txt").write_text("Document 4 is about Levi's Stadium. " * 20)
        result = CliRunner().invoke(main, ["ingest", str(docs), "--json"], env=worker_env)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["state"] == "done"
        assert len(catalog.list_documents(status=DocumentStatus.INDEXED)) == 5
        result = CliRunner().invoke(main, ["docs", "remove", str(docs / "doc0.txt")], env=worker_env)
        assert result.exit_code == 0 and "removed" in result.output, result.output
        assert len(catalog.list_documents(status=DocumentStatus.INDEXED)) == 4
    finally:
        stop(process)
    assert_points_match_chunks(settings, catalog)
    catalog.close()


def test_ask_with_the_store_held_and_no_worker_is_a_one_line_error(
    settings: Settings, worker_env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Denver Broncos won Super Bowl 50 at Levi's Stadium.")
    inline_env = {k: v for k, v in worker_env.items() if k != "SPANQA_BROKER_URL"}
    assert CliRunner().invoke(main, ["ingest", str(docs)], env=inline_env).exit_code == 0
    with EdgeVectorIndex(settings.qdrant_path):  # held by "another process": a separate open file
        result = CliRunner().invoke(main, ["ask", "Who won?"], env=worker_env)
    assert result.exit_code == 2, result.output
    assert "held by another process and no spanqa worker answers" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_worker_killed_mid_file_leaves_it_indexed_exactly_once(
    settings: Settings, worker_env: dict[str, str], tmp_path: Path
) -> None:
    # The killed worker's task comes back to the queue only after the visibility timeout: a short one.
    worker_env = {**worker_env, "SPANQA_BROKER_VISIBILITY_TIMEOUT_S": "4"}
    docs = tmp_path / "docs"
    docs.mkdir()
    sentence = "The Denver Broncos defeated the Carolina Panthers at Levi's Stadium in Santa Clara. "
    (docs / "large.txt").write_text(sentence * 6000)  # long enough to be killed in the middle
    log = tmp_path / "worker.log"
    process = start_worker(worker_env, log)
    catalog = Catalog(settings.catalog_url)
    try:
        job_id = enqueue(worker_env, str(docs))
        deadline = time.time() + 60
        while time.time() < deadline and "spanqa.ingest_file" not in log.read_text():
            time.sleep(0.1)
        time.sleep(1.0)  # inside the file: loading, chunking or embedding
        assert catalog.get_job(job_id).done == 0  # type: ignore[union-attr]
        stop(process, signal.SIGKILL)
        process = start_worker(worker_env, log)
        assert wait_for_job(catalog, job_id, log, timeout=240) == "done"
    finally:
        stop(process)
    documents = catalog.list_documents(status=DocumentStatus.INDEXED)
    assert len(documents) == 1 and documents[0].num_chunks > 50
    assert_points_match_chunks(settings, catalog)
    catalog.close()
