"""The HTTP API and the web page of ``spanqa serve`` (FastAPI).

One process owns the runtime: the embedded store and both models stay open and warm, as in a worker.
Questions run in a pool of ``serve_concurrency`` threads (the ONNX sessions, the tokenizers and the store
are safe to share); at most ``serve_queue`` more wait, and a question beyond that gets a 503 at once.
Ingest runs as a job: in a background thread, or on the workers when a broker and a Qdrant server are set
(an embedded store is this process's alone).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spanqa import __version__, pipeline
from spanqa.errors import SpanqaError, first_line
from spanqa.ingest.positions import Places
from spanqa.ingest.report import Progress
from spanqa.records import (
    CONFIDENCE_WORDS,
    ask_record,
    document_detail,
    document_dict,
    job_dict,
    search_record,
)
from spanqa.runtime import EmptyIndexError, Runtime
from spanqa.server.models import (
    AskRequest,
    AskResponse,
    DocumentDetail,
    DocumentOut,
    ErrorOut,
    Health,
    IngestRequest,
    InternalAsk,
    InternalIngest,
    InternalRemove,
    InternalSearch,
    JobOut,
    SearchResponse,
)
from spanqa.server.security import (
    API_KEY_HEADER,
    LOOPBACK_HOSTS,
    PathNotServedError,
    key_matches,
    served_path,
)
from spanqa.types import DocumentStatus, Job, SearchOptions
from spanqa.workers.client import (
    INTERNAL_ASK,
    INTERNAL_INGEST,
    INTERNAL_REMOVE,
    INTERNAL_SEARCH,
    INTERNAL_TOKEN_HEADER,
    STREAM_HEARTBEAT_S,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
STATIC = resources.files("spanqa.server") / "static"
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 500, 503)
}


class Busy(SpanqaError):
    """More questions are waiting than ``serve_queue`` allows."""


class _Gate:
    """At most ``running`` calls at once in worker threads, at most ``waiting`` more queued behind them."""

    def __init__(self, running: int, waiting: int) -> None:
        self.limiter = anyio.CapacityLimiter(max(1, running))
        self.capacity = max(1, running) + max(0, waiting)
        self.inside = 0

    async def run(self, function: Callable[[], T]) -> T:
        if self.inside >= self.capacity:  # one event loop: no race between this check and the increment
            raise Busy(f"busy: {self.inside} questions are in progress or waiting; ask again shortly")
        self.inside += 1
        try:
            return await anyio.to_thread.run_sync(function, limiter=self.limiter)
        finally:
            self.inside -= 1


class _BodyLimit:
    """Refuse request bodies over ``limit`` bytes with a 413, whether or not they declare their length (a
    streamed body stops being read at the limit: FastAPI passes the HTTPException on as it is)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(self.limit)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise HTTPException(413, _too_large_message(self.limit))
            return message

        await self.app(scope, counted, send)


def _too_large_message(limit: int) -> str:
    return f"request body over {limit} bytes"


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"error": _too_large_message(limit)}, status_code=413)


class _Stopped(SpanqaError):
    """The server is shutting down: the ingest stops after the file it is on (each file commits whole)."""


class _IngestRunner:
    """Ingest jobs run here, one at a time, in a background thread (the catalog records their progress)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.current: str | None = None

    def stop(self, timeout: float = 60.0) -> None:
        """Stop a running ingest after its current file and wait for it (before the store closes)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def start(self, path: Path, *, prune: bool) -> Job:
        if not self._lock.acquire(blocking=False):
            raise HTTPException(409, f"an ingest is running (job {self.current}): wait for it to finish")
        try:
            job = self.runtime.catalog.create_job("ingest", {"paths": [str(path)], "prune": prune})
            self.current = job.id
            self._thread = threading.Thread(target=self._run, args=(job.id, path, prune), daemon=True)
            self._thread.start()
        except BaseException:
            self._lock.release()
            raise
        return job

    def stream(self, request: InternalIngest) -> Iterator[bytes]:
        """Run a CLI's ingest here, now (after a running job, for at most ``store_wait_s``), sending its
        progress and then its report as JSON lines; a line at least every ``STREAM_HEARTBEAT_S``."""
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._run_for_client, args=(events, request), daemon=True).start()
        while True:
            try:
                event = events.get(timeout=STREAM_HEARTBEAT_S)
            except queue.Empty:
                event = {"event": "alive"}
            if event is None:
                return
            yield (json.dumps(event) + "\n").encode()

    def remove(self, document_id: str) -> None:
        """Remove a document for a CLI, between two files of a running ingest at the latest."""
        wait_s = self.runtime.settings.store_wait_s
        if not self._lock.acquire(timeout=wait_s):
            raise HTTPException(409, f"an ingest still runs on the server after {wait_s:g} s: try again")
        try:
            self.runtime.ingest_job().remove_document(document_id)
        finally:
            self._lock.release()

    def _run_for_client(self, events: queue.Queue[dict[str, Any] | None], request: InternalIngest) -> None:
        wait_s = self.runtime.settings.store_wait_s
        try:
            if not self._lock.acquire(blocking=False):
                events.put({"event": "waiting", "reason": f"the server is running ingest job {self.current}"})
                if not self._lock.acquire(timeout=wait_s):
                    raise _Stopped(f"the server's ingest job is still running after {wait_s:g} s: try again")
            try:
                job = self.runtime.ingest_job()
                paths = [Path(p) for p in request.paths]
                found = job.discover(paths, include=request.include, exclude=request.exclude)
                events.put({"event": "start", "files_total": len(found)})

                def progress(done: Progress) -> None:
                    events.put({"event": "progress", **dataclasses.asdict(done)})
                    if self._stopping.is_set():
                        raise _Stopped("stopped: the server shut down (ingest again to finish)")

                report = job.run(
                    paths,
                    prune=request.prune,
                    include=request.include,
                    exclude=request.exclude,
                    on_progress=progress,
                )
                kept = 0 if request.prune else len(job.vanished(paths))
                events.put({"event": "report", "report": report.to_dict(), "vanished_kept": kept})
            finally:
                self._lock.release()
        except Exception as exc:  # sent to the CLI, which shows it as its own one-line error
            if not isinstance(exc, SpanqaError):
                logger.exception("an ingest for another process failed")
            events.put({"event": "error", "error": first_line(exc)})
        finally:
            events.put(None)

    def _run(self, job_id: str, path: Path, prune: bool) -> None:
        catalog = self.runtime.catalog
        roots = self.runtime.settings.serve_root_paths
        try:
            catalog.update_job(job_id, state="running")

            def progress(done: Progress) -> None:
                catalog.update_job(job_id, done=done.files_done, total=done.files_total)
                if self._stopping.is_set():
                    raise _Stopped("stopped: the server shut down (ingest again to finish)")

            report = self.runtime.ingest_job().run(
                [path], prune=prune, confine_to=roots, on_progress=progress
            )
            catalog.update_job(job_id, state="done", failed=report.summary()["failed"])
        except Exception as exc:  # recorded on the job: the client sees it with GET /jobs/{id}
            logger.exception("ingest job %s failed", job_id)
            catalog.update_job(job_id, state="failed", error=first_line(exc))
        finally:
            self.current = None
            self._lock.release()


def create_app(runtime: Runtime, *, internal_token: str | None = None) -> FastAPI:
    """The app over an opened ``runtime`` (its store is this process's; its models load at start-up).

    Args:
        runtime: the components; the app closes nothing (the caller owns the runtime).
        internal_token: with it, the internal routes other spanqa processes on the same data folder ask
            through; they must send it (it is in the data folder's ``serve.json``, readable by its owner).
    """
    settings = runtime.settings
    gate = _Gate(settings.serve_concurrency, settings.serve_queue)
    ingests = _IngestRunner(runtime)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(_warm_up, runtime)
        yield
        await anyio.to_thread.run_sync(ingests.stop)

    async def require_key(request: Request) -> None:
        given = request.headers.get(API_KEY_HEADER)
        bearer = request.headers.get("authorization", "")
        if given is None and bearer.lower().startswith("bearer "):
            given = bearer[7:].strip()
        if not key_matches(settings.api_key, given):
            raise HTTPException(401, f"missing or wrong API key (send it as {API_KEY_HEADER})")

    app = FastAPI(
        title="spanqa",
        version=__version__,
        summary="Exact answers from your own documents",
        lifespan=lifespan,
        responses=ERRORS,
        # FastAPI's /docs and /redoc pages load their scripts from a CDN, which an offline machine cannot
        # reach: the schema itself is at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(_BodyLimit, limit=settings.serve_max_request_bytes)
    if not settings.api_key:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))
    _add_error_handlers(app)
    api = [Depends(require_key)]

    @app.get("/health", response_model=Health, dependencies=api)
    async def health() -> dict[str, Any]:
        counts = await anyio.to_thread.run_sync(runtime.catalog.counts)
        return {
            "status": "ok",
            "documents": counts[DocumentStatus.INDEXED.value],
            "chunks": counts["chunks"],
            "models_loaded": runtime.models_loaded,
            "version": __version__,
        }

    @app.post("/ask", response_model=AskResponse, dependencies=api)
    async def ask(body: AskRequest) -> dict[str, Any]:
        question = body.question.strip()
        if not question:
            raise HTTPException(422, "the question is empty")
        if len(question) > settings.serve_max_question_chars:
            limit = settings.serve_max_question_chars
            raise HTTPException(422, f"the question is over {limit} characters (serve_max_question_chars)")

        def answer() -> dict[str, Any]:
            result = pipeline.ask(runtime, question, body.options())
            # Placing answers reads their files: in the worker thread too, never on the event loop.
            return ask_record(result, places=Places(runtime.catalog).of_answer)

        return await gate.run(answer)

    @app.get("/search", response_model=SearchResponse, dependencies=api)
    async def search(
        q: Annotated[str, Query(min_length=1, description="the query")],
        k: Annotated[
            int | None, Query(ge=1, le=200, description="passages to return (default: search_top_k)")
        ] = None,
        path: Annotated[str | None, Query(max_length=1000, description="a glob on the paths")] = None,
    ) -> dict[str, Any]:
        query = q.strip()
        if not query or len(query) > settings.serve_max_question_chars:
            limit = settings.serve_max_question_chars
            raise HTTPException(422, f"the query must have 1 to {limit} characters")
        result = await gate.run(lambda: pipeline.search(runtime, query, SearchOptions(k, path)))
        return search_record(query, result)

    # What the CLI runs through the server while it holds the store: ask and search, answered in the shape a
    # worker returns (AskResult / SearchResult), ingest (progress as JSON lines) and removal. Not for clients.
    async def require_token(request: Request) -> None:
        given = request.headers.get(INTERNAL_TOKEN_HEADER)
        if internal_token is None or not key_matches(internal_token, given or ""):
            raise HTTPException(403, "internal route: only spanqa processes on this data folder")

    internal = [*api, Depends(require_token)]

    @app.post(INTERNAL_ASK, dependencies=internal, include_in_schema=False)
    async def internal_ask(body: InternalAsk) -> dict[str, Any]:
        result = await gate.run(lambda: pipeline.ask(runtime, body.question, body.options()))
        return result.to_dict()

    @app.post(INTERNAL_SEARCH, dependencies=internal, include_in_schema=False)
    async def internal_search(body: InternalSearch) -> dict[str, Any]:
        found = await gate.run(lambda: pipeline.search(runtime, body.query, body.options()))
        return found.to_dict()

    @app.post(INTERNAL_INGEST, dependencies=internal, include_in_schema=False)
    async def internal_ingest(body: InternalIngest) -> StreamingResponse:
        return StreamingResponse(ingests.stream(body), media_type="application/x-ndjson")

    @app.post(INTERNAL_REMOVE, dependencies=internal, include_in_schema=False)
    async def internal_remove(body: InternalRemove) -> dict[str, Any]:
        await anyio.to_thread.run_sync(ingests.remove, body.document_id)
        return {"removed": body.document_id}

    @app.get("/documents", response_model=list[DocumentOut], dependencies=api)
    async def documents(
        status: Annotated[DocumentStatus | None, Query(description="only documents with this status")] = None,
    ) -> list[dict[str, Any]]:
        listed = await anyio.to_thread.run_sync(lambda: runtime.catalog.list_documents(status=status))
        return [document_dict(d) for d in listed]

    @app.get("/documents/{reference}", response_model=DocumentDetail, dependencies=api)
    async def document(
        reference: str,
        text: Annotated[bool, Query(description="include the indexed text")] = True,
        start: Annotated[int | None, Query(ge=0, description="start of a span to highlight")] = None,
        end: Annotated[int | None, Query(ge=0, description="end of a span to highlight")] = None,
    ) -> dict[str, Any]:
        def load() -> dict[str, Any]:
            found = runtime.catalog.find_documents(reference)
            if not found:
                raise HTTPException(404, f"no document matches '{reference}'")
            if len(found) > 1:
                raise HTTPException(409, f"'{reference}' matches {len(found)} documents: give more of the id")
            full = runtime.catalog.get_document(found[0].id)
            if full is None:
                raise HTTPException(404, f"no document matches '{reference}'")
            data = document_detail(full, runtime.catalog.chunks_of(full.id), with_text=text)
            if start is not None and end is not None:
                if not start <= end <= len(full.text):
                    size = len(full.text)
                    raise HTTPException(422, f"the span {start}-{end} is not inside the text ({size} chars)")
                data["highlight"] = {"char_start": start, "char_end": end}
            return data

        return await anyio.to_thread.run_sync(load)

    @app.post("/ingest", response_model=JobOut, status_code=202, dependencies=api)
    async def ingest(body: IngestRequest) -> dict[str, Any]:
        try:
            path = served_path(body.path, settings)
        except PathNotServedError as exc:
            raise HTTPException(exc.status, str(exc)) from exc
        # On the workers only when they can open the store: an embedded one is this process's.
        if settings.broker_url and settings.qdrant_url:
            from spanqa.workers.client import enqueue_ingest

            job = await anyio.to_thread.run_sync(
                lambda: enqueue_ingest(
                    settings,
                    [str(path)],
                    prune=body.prune,
                    include=(),
                    exclude=(),
                    confine_to=[str(root) for root in settings.serve_root_paths],
                )
            )
        else:
            job = await anyio.to_thread.run_sync(lambda: ingests.start(path, prune=body.prune))
        return job_dict(job)

    @app.get("/jobs/{job_id}", response_model=JobOut, dependencies=api)
    async def job(job_id: str) -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(runtime.catalog.get_job, job_id)
        if found is None:
            raise HTTPException(404, f"no job {job_id}")
        return job_dict(found)

    page = _page(ingest_enabled=bool(runtime.settings.serve_root_paths))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> str:
        return page

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app


def _warm_up(runtime: Runtime) -> None:
    """Load both models before the first question (a question never waits for a model)."""
    runtime.encoder  # noqa: B018 - loads it
    runtime.reader.warm_up()


def _page(*, ingest_enabled: bool) -> str:
    """The web page, with the words that go with a score (owned by spanqa.records) and whether it may offer
    to ingest filled in."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    words = json.dumps([[floor, word] for floor, word in CONFIDENCE_WORDS])
    html = html.replace("/*CONFIDENCE_WORDS*/[]", words)
    return html.replace("/*INGEST_ENABLED*/false", json.dumps(ingest_enabled))


def _add_error_handlers(app: FastAPI) -> None:
    """Every error is ``{"error": "one line"}``: never a traceback, never a framework page."""

    def handler(status: int) -> Callable[[Request, Any], Awaitable[JSONResponse]]:
        async def respond(_: Request, exc: Any) -> JSONResponse:
            return JSONResponse({"error": first_line(exc)}, status_code=status)

        return respond

    async def http_error(_: Request, exc: Any) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    async def invalid(_: Request, exc: Any) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            # Not a field's fault: the body is not JSON at all ("0: JSON decode error" said nothing).
            at = first.get("loc", ("body", 0))[-1]
            problem = first.get("ctx", {}).get("error", "JSON decode error")
            message = f"the request body is not valid JSON ({problem} at character {at}): send a JSON object"
            return JSONResponse({"error": message}, status_code=400)
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid request')}"}, status_code=422)

    async def busy(_: Request, exc: Any) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": "1"})

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.error("unexpected error", exc_info=exc)
        return JSONResponse({"error": "internal error (the server's log has the details)"}, status_code=500)

    from starlette.exceptions import HTTPException as StarletteHTTPException

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Busy, busy)
    app.add_exception_handler(EmptyIndexError, handler(409))
    app.add_exception_handler(SpanqaError, handler(400))
    app.add_exception_handler(Exception, unexpected)
