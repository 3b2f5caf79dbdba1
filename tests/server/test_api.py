"""The HTTP API on the tiny models: the CLI's JSON shapes, documents shown with their span, ingest jobs,
safety (key, roots, symlinks, limits, a full queue) and concurrent questions answered as one at a time."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spanqa import pipeline
from spanqa.ingest.positions import Places
from spanqa.records import ask_record
from spanqa.runtime import Runtime
from spanqa.server.app import create_app
from spanqa.server.security import ServeError, check_bind
from spanqa.settings import Settings
from spanqa.types import AskOptions, DocumentStatus

DOCS = {
    "broncos.txt": "The Denver Broncos defeated the Carolina Panthers 24 to 10. "
    "The game was played at Levi's Stadium in Santa Clara.\n\n" * 3,
    "warsaw.md": "# Warsaw\n\nWarsaw is the capital and largest city of Poland. It lies on the Vistula.\n"
    * 3,
}
LOCAL = "http://127.0.0.1"
QUESTIONS = ["Who won the game?", "Where is Warsaw?", "Where was the game played?", "What river is it on?"]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


def _client(settings: Settings) -> Iterator[tuple[TestClient, Runtime]]:
    with Runtime(settings) as runtime, TestClient(create_app(runtime), base_url=LOCAL) as client:
        yield client, runtime


@pytest.fixture
def served(settings: Settings, docs: Path) -> Iterator[tuple[TestClient, Runtime]]:
    settings = settings.replace(serve_roots=str(docs.parent), min_score=0.0)
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
    yield from _client(settings)


def test_ask_gives_the_cli_shape_with_exact_spans(served: tuple[TestClient, Runtime]) -> None:
    client, runtime = served
    response = client.post("/ask", json={"question": "Who won the game?", "answers": 2, "passages": 3})
    assert response.status_code == 200, response.text
    data = response.json()
    result = pipeline.ask(runtime, "Who won the game?", AskOptions(answers=2, passages=3))
    expected = ask_record(result, places=Places(runtime.catalog).of_answer)
    for record in (data, expected):
        record.pop("timings_ms")
    assert data == expected  # the same record as `spanqa ask --json`
    assert data["answers"] and len(data["passages"]) <= 3
    for answer in data["answers"]:
        shown = client.get(
            f"/documents/{answer['document_id']}",
            params={"start": answer["char_start"], "end": answer["char_end"]},
        ).json()
        span = shown["text"][answer["char_start"] : answer["char_end"]]
        assert span == answer["text"] and shown["highlight"]["char_start"] == answer["char_start"]
        context = answer["context"]
        offset = answer["char_start"] - answer["context_start"]
        assert context[offset : offset + len(answer["text"])] == answer["text"]


def test_search_documents_health_and_errors(served: tuple[TestClient, Runtime]) -> None:
    client, _ = served
    found = client.get("/search", params={"q": "Poland", "k": 2}).json()
    assert found["query"] == "Poland" and 1 <= len(found["passages"]) <= 2
    listed = client.get("/documents").json()
    assert {Path(d["path"]).name for d in listed} == set(DOCS)
    assert all(d["status"] == "indexed" for d in listed)
    assert client.get("/documents", params={"status": "failed"}).json() == []
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["documents"] == 2 and health["models_loaded"]
    paths = client.get("/openapi.json").json()["paths"]
    assert paths.keys() >= {"/ask", "/search", "/ingest", "/jobs/{job_id}", "/documents/{reference}"}
    for response, status in [
        (client.get("/documents/nope-nope"), 404),
        (client.get(f"/documents/{listed[0]['id']}", params={"start": 5, "end": 10**6}), 422),
        (client.get("/jobs/nope"), 404),
        (client.post("/ask", json={"question": "   "}), 422),
        (client.post("/ask", json={"question": "x" * 2001}), 422),
        (client.post("/ask", json={"question": "Who?", "answers": 0}), 422),
        (client.post("/ask", content=b"{not json", headers={"content-type": "application/json"}), 400),
    ]:
        assert response.status_code == status, response.text
        assert set(response.json()) == {"error"} and "Traceback" not in response.text
    not_json = client.post("/ask", content=b"{not json", headers={"content-type": "application/json"})
    assert not_json.json()["error"].startswith("the request body is not valid JSON")


def test_ingest_runs_as_a_job_and_stays_inside_the_roots(
    served: tuple[TestClient, Runtime], docs: Path, tmp_path: Path
) -> None:
    client, _ = served
    (docs / "new.txt").write_text("The Vistula is the longest river in Poland.")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The secret code is 4242.")
    (docs / "linked").symlink_to(outside, target_is_directory=True)
    (docs / "linked-file.txt").symlink_to(outside / "secret.txt")
    job = client.post("/ingest", json={"path": str(docs)})
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    deadline = time.time() + 60
    while (state := client.get(f"/jobs/{job_id}").json())["state"] not in ("done", "failed"):
        assert time.time() < deadline
        time.sleep(0.1)
    assert state["state"] == "done" and state["failed"] == 0, state
    paths = {Path(d["path"]).name for d in client.get("/documents").json()}
    assert "new.txt" in paths and "secret.txt" not in paths and "linked-file.txt" not in paths
    (docs / ".secrets").mkdir()
    (docs / ".secrets" / "key.txt").write_text("hidden")
    for body, status in [
        ({"path": str(outside)}, 403),
        ({"path": str(docs / "linked")}, 403),  # resolves outside the roots
        ({"path": str(docs / ".secrets")}, 403),  # hidden folders are not served
        ({"path": str(docs / ".secrets" / "key.txt")}, 403),
        ({"path": f"{docs}/../{docs.name}"}, 422),
        ({"path": "relative/path"}, 422),
        ({"path": str(docs / "missing")}, 422),
    ]:
        response = client.post("/ingest", json=body)
        assert response.status_code == status, response.text


def test_ingest_is_off_without_roots(settings: Settings, docs: Path) -> None:
    for client, _ in _client(settings):
        response = client.post("/ingest", json={"path": str(docs)})
        assert response.status_code == 403 and "SPANQA_SERVE_ROOTS" in response.json()["error"]


def test_api_key_bind_and_body_limit(settings: Settings) -> None:
    keyed = settings.replace(api_key="s3cret", serve_max_request_bytes=200)
    for client, _ in _client(keyed):
        assert client.get("/health").status_code == 401
        assert client.get("/health", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get("/health", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert client.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/").status_code == 200  # the page itself holds nothing: it asks for the key
        big = client.post("/ask", json={"question": "x" * 500}, headers={"X-API-Key": "s3cret"})
        assert big.status_code == 413 and big.json() == {"error": "request body over 200 bytes"}
        streamed = client.post(  # no Content-Length: counted as it arrives
            "/ask",
            content=(part for part in [b'{"question": "', b"x" * 500, b'"}']),
            headers={"X-API-Key": "s3cret", "content-type": "application/json"},
        )
        assert streamed.status_code == 413 and streamed.json() == {"error": "request body over 200 bytes"}
    check_bind("127.0.0.1", settings)
    check_bind("::1", settings)
    with pytest.raises(ServeError, match="SPANQA_API_KEY"):
        check_bind("0.0.0.0", settings)
    check_bind("0.0.0.0", keyed)


def test_concurrent_questions_get_the_answers_of_one_at_a_time(served: tuple[TestClient, Runtime]) -> None:
    client, _ = served

    def ask(question: str) -> list[tuple[str, int, int, float]]:
        data = client.post("/ask", json={"question": question}).json()
        return [(a["text"], a["char_start"], a["char_end"], round(a["score"], 6)) for a in data["answers"]]

    alone = {q: ask(q) for q in QUESTIONS}
    asked = [QUESTIONS[i % len(QUESTIONS)] for i in range(20)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        together = list(pool.map(ask, asked))
    assert together == [alone[q] for q in asked]


def test_a_full_queue_answers_503(settings: Settings, docs: Path) -> None:
    settings = settings.replace(serve_concurrency=1, serve_queue=0)
    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
        entered, release = threading.Event(), threading.Event()
        real_ask = pipeline.ask

        def slow_ask(*args: object, **kwargs: object) -> pipeline.AskResult:
            entered.set()
            release.wait(10)
            return real_ask(*args, **kwargs)  # type: ignore[arg-type]

        with TestClient(create_app(runtime), base_url=LOCAL) as client, pytest.MonkeyPatch.context() as patch:
            patch.setattr(pipeline, "ask", slow_ask)
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                first = pool.submit(client.post, "/ask", json={"question": "Who won?"})
                assert entered.wait(10)  # the first question holds the only place
                second = client.post("/ask", json={"question": "Who won?"})
                release.set()
                assert first.result().status_code == 200
            assert second.status_code == 503 and "busy" in second.json()["error"]
            assert second.headers["retry-after"] == "1"


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_served_path_resolves_symlinks(settings: Settings, tmp_path: Path) -> None:
    from spanqa.server.security import PathNotServedError, served_path

    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("x")
    (root / "escape").symlink_to(tmp_path)
    served = settings.replace(serve_roots=f"{root}{os.pathsep}{tmp_path / 'other'}")
    assert served_path(str(root / "inside.txt"), served) == (root / "inside.txt").resolve()
    with pytest.raises(PathNotServedError) as caught:
        served_path(str(root / "escape"), served)
    assert caught.value.status == 403


@pytest.mark.integration
def test_ingest_goes_to_the_workers_when_they_can_open_the_store(settings: Settings, docs: Path) -> None:
    import redis

    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {url} (scripts/test.sh starts one)")
    embedded = settings.replace(serve_roots=str(docs), broker_url=url)
    shared = embedded.replace(qdrant_url=":memory:")
    try:
        for client, runtime in _client(shared):
            job = client.post("/ingest", json={"path": str(docs)}).json()
            recorded = runtime.catalog.get_job(job["id"])
            assert recorded is not None and recorded.state == "pending"  # queued: no worker runs here
            assert recorded.arguments["confine_to"] == [str(docs.resolve())]
        for client, _ in _client(embedded):  # an embedded store is this process's: ingested here
            job = client.post("/ingest", json={"path": str(docs)}).json()
            deadline = time.time() + 60
            while client.get(f"/jobs/{job['id']}").json()["state"] != "done":
                assert time.time() < deadline
                time.sleep(0.1)
    finally:
        redis.Redis.from_url(url).flushdb()


def test_nothing_is_loaded_from_elsewhere(served: tuple[TestClient, Runtime]) -> None:
    client, _ = served
    page = client.get("/").text + client.get("/static/app.js").text + client.get("/static/style.css").text
    assert "http://" not in page and "https://" not in page  # no CDN: the page works offline
    assert client.get("/docs").status_code == 404  # FastAPI's docs page would fetch its scripts from a CDN


def test_without_a_key_only_this_machine_s_names_are_answered(served: tuple[TestClient, Runtime]) -> None:
    client, _ = served
    assert client.get("/health").status_code == 200
    for host in ("localhost:8000", "[::1]:8000"):
        assert client.get("/health", headers={"host": host}).status_code == 200
    # A page elsewhere that rebinds its own name to 127.0.0.1 sends that name: refused.
    assert client.get("/documents", headers={"host": "evil.example:8000"}).status_code == 400


def test_a_shutdown_stops_a_running_ingest_after_its_file(settings: Settings, tmp_path: Path) -> None:
    docs = tmp_path / "many"
    docs.mkdir()
    for i in range(150):
        (docs / f"f{i:03d}.txt").write_text(f"File {i} is about the Denver Broncos and Santa Clara. " * 30)
    with Runtime(settings.replace(serve_roots=str(docs))) as runtime:
        with TestClient(create_app(runtime), base_url=LOCAL) as client:
            job_id = client.post("/ingest", json={"path": str(docs)}).json()["id"]
            deadline = time.time() + 60
            while (client.get(f"/jobs/{job_id}").json()["done"]) < 2:  # under way
                assert time.time() < deadline
                time.sleep(0.02)
        # Leaving the client shut the app down: it waited for the ingest to stop before the store closed.
        job = runtime.catalog.get_job(job_id)
        assert job is not None and job.state == "failed" and "server shut down" in (job.error or "")
        indexed = runtime.catalog.list_documents(status=DocumentStatus.INDEXED)
        assert 2 <= len(indexed) < 150
        for document in indexed:  # each file it did is whole
            assert len(runtime.catalog.chunks_of(document.id)) == document.num_chunks > 0


def test_internal_routes_answer_only_with_the_data_folders_token(settings: Settings, docs: Path) -> None:
    from spanqa.pipeline import AskResult
    from spanqa.workers.client import INTERNAL_ASK, INTERNAL_TOKEN_HEADER

    with Runtime(settings) as runtime:
        runtime.ingest_job().run([docs])
    with Runtime(settings) as runtime:
        plain = TestClient(create_app(runtime), base_url=LOCAL)
        # A server started without a token (not by `spanqa serve`) has no internal route to offer.
        assert plain.post(INTERNAL_ASK, json={"question": "Who won?"}).status_code == 403
        with TestClient(create_app(runtime, internal_token="s3cret-token"), base_url=LOCAL) as client:
            body = {"question": "Who won the game?", "min_score": 0.0}
            assert client.post(INTERNAL_ASK, json=body).status_code == 403
            wrong = client.post(INTERNAL_ASK, json=body, headers={INTERNAL_TOKEN_HEADER: "guess"})
            assert wrong.status_code == 403 and set(wrong.json()) == {"error"}
            right = client.post(INTERNAL_ASK, json=body, headers={INTERNAL_TOKEN_HEADER: "s3cret-token"})
            assert right.status_code == 200
            result = AskResult.from_dict(right.json())  # what a worker returns, for the CLI to print
            assert result.question == "Who won the game?" and result.passages
            assert INTERNAL_ASK not in client.get("/openapi.json").json()["paths"]
