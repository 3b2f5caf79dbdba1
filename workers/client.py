"""How a command reaches the workers: enqueue a job, or ask the process that owns the embedded store.

The CLI (and the server) call these; they never talk to Celery themselves.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spanqa import pipeline
from spanqa.errors import SpanqaError
from spanqa.ingest.catalog import Catalog
from spanqa.retriever.index import VectorIndexInUseError
from spanqa.runtime import Runtime
from spanqa.settings import Settings
from spanqa.types import AskOptions, Job, SearchOptions
from spanqa.workers import names

logger = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0
#: The routes of `spanqa serve` that answer for other spanqa processes on its data folder.
INTERNAL_ASK, INTERNAL_SEARCH = "/internal/ask", "/internal/search"
INTERNAL_INGEST, INTERNAL_REMOVE = "/internal/ingest", "/internal/remove"
#: A streamed answer (an ingest's progress) sends a line at least this often, so that a silent server is a
#: dead one.
STREAM_HEARTBEAT_S = 2.0
#: The header that carries the token the server left in the data folder (who can read it may ask through it).
INTERNAL_TOKEN_HEADER = "X-Spanqa-Token"


class WorkerUnavailableError(SpanqaError):
    """No worker answered, or none answered in time; the message is one line, fit to show to the user."""


class BrokerRequiredError(SpanqaError):
    """Background work was asked for, but no broker is set."""


def require_broker(settings: Settings, what: str) -> None:
    """Raise BrokerRequiredError unless ``settings`` name a broker; ``what`` names the asking command."""
    if not settings.broker_url:
        raise BrokerRequiredError(
            f"{what} needs a broker: set SPANQA_BROKER_URL (e.g. redis://127.0.0.1:6379/0)"
        )


def enqueue(settings: Settings, kind: str, task: str, arguments: dict[str, Any]) -> Job:
    """Record a job in the catalog and send ``task`` to the workers with the job id, then ``arguments``.

    Args:
        settings: with ``broker_url`` set.
        kind: the job's kind as ``spanqa jobs`` shows it (``ingest``, ``reindex``).
        task: a task name of :mod:`workers.names`.
        arguments: the task's arguments after the job id, in order (JSON values).

    Returns:
        The job as recorded (pending).
    """
    from spanqa.workers.app import create_app

    require_broker(settings, "--background")
    with Catalog(settings.catalog_url) as catalog:
        job = catalog.create_job(kind, arguments)
    create_app(settings).tasks[task].delay(job.id, *arguments.values())
    return job


def enqueue_ingest(
    settings: Settings,
    paths: Sequence[str],
    *,
    prune: bool,
    include: Sequence[str],
    exclude: Sequence[str],
    confine_to: Sequence[str] = (),
) -> Job:
    """Enqueue the ingest of ``paths`` (absolute, existing) for the workers; symlinks may not lead out of
    ``confine_to`` (resolved folders) where it is given."""
    arguments: dict[str, Any] = {
        "paths": list(paths),
        "prune": prune,
        "include": list(include),
        "exclude": list(exclude),
    }
    if confine_to:
        arguments["confine_to"] = list(confine_to)
    return enqueue(settings, "ingest", names.INGEST_PATH, arguments)


def enqueue_reindex(settings: Settings, retriever_model: str) -> Job:
    """Enqueue a blue/green rebuild of the vector collection with ``retriever_model``."""
    return enqueue(settings, "reindex", names.REINDEX, {"retriever_model": retriever_model})


class WorkerClient:
    """Runs ``spanqa.ask`` / ``spanqa.search`` on a running worker and waits for the result.

    Args:
        settings: with ``broker_url`` set; ``ask_timeout_s`` bounds each wait.
    """

    def __init__(self, settings: Settings) -> None:
        from spanqa.workers.app import create_app

        require_broker(settings, "asking a worker")
        self.settings = settings
        self.app = create_app(settings)
        self._seen_worker = False

    def call(self, task: str, **kwargs: Any) -> dict[str, Any]:
        """Run ``task`` with ``kwargs`` (JSON values, by keyword) on a worker; return its result.

        Returns:
            ``AskResult.to_dict()`` or ``SearchResult.to_dict()`` as computed by the worker.

        Raises:
            WorkerUnavailableError: no worker is running, or none answered within ``ask_timeout_s``.
        """
        from celery.exceptions import TimeoutError as ResultTimeout

        if not self._seen_worker:
            # Returns at the first reply; waits the whole timeout only when no worker is there.
            if not self.app.control.ping(timeout=PING_TIMEOUT_S, limit=1):
                raise WorkerUnavailableError("no spanqa worker answers on the broker")
            self._seen_worker = True
        pending = self.app.send_task(task, kwargs=kwargs)
        try:
            data: dict[str, Any] = pending.get(timeout=self.settings.ask_timeout_s)
        except ResultTimeout:
            pending.forget()
            raise WorkerUnavailableError(
                f"the worker did not answer within {self.settings.ask_timeout_s:g} s (it may be busy with a "
                "large file): ask again, or raise SPANQA_ASK_TIMEOUT_S"
            ) from None
        return data


def announce_server(path: Path, url: str, token: str) -> None:
    """Leave a running server's address and token in the data folder, readable by its owner only (written
    whole, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": os.getpid(), "token": token}, handle)
    temporary.replace(path)


def withdraw_server(path: Path) -> None:
    """Remove this process's address (never another server's)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def running_server(settings: Settings) -> tuple[str, str] | None:
    """The URL and token of the `spanqa serve` that holds this data folder's store, while it runs."""
    try:
        data = json.loads(settings.server_file.read_text(encoding="utf-8"))
        os.kill(int(data["pid"]), 0)  # a server killed without cleaning up leaves a stale file
        return str(data["url"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ServerClient:
    """Runs ask and search on the running `spanqa serve` of this data folder (its internal routes return
    what a worker returns: ``AskResult.to_dict()``, ``SearchResult.to_dict()``)."""

    def __init__(self, settings: Settings, url: str, token: str) -> None:
        self.settings = settings
        self.url = url.rstrip("/")
        self.token = token

    def call(self, route: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``route`` and return the JSON answer."""
        import urllib.error

        try:
            with self._open(route, payload, timeout=self.settings.ask_timeout_s) as response:
                data: dict[str, Any] = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise self._refused(exc) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise WorkerUnavailableError(f"the server at {self.url} did not answer ({exc})") from None
        return data

    def stream(self, route: str, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST ``payload`` to ``route`` and yield each line of its JSON-lines answer as it comes."""
        import urllib.error

        try:
            with self._open(route, payload, timeout=STREAM_HEARTBEAT_S * 15) as response:
                for line in response:
                    if line.strip():
                        yield json.loads(line)
        except urllib.error.HTTPError as exc:
            raise self._refused(exc) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise WorkerUnavailableError(f"the server at {self.url} stopped answering ({exc})") from None

    def _open(self, route: str, payload: dict[str, Any], *, timeout: float) -> Any:
        import urllib.request

        request = urllib.request.Request(
            f"{self.url}{route}",
            data=json.dumps(payload).encode(),
            headers={"content-type": "application/json", INTERNAL_TOKEN_HEADER: self.token},
            method="POST",
        )
        if self.settings.api_key:
            request.add_header("X-API-Key", self.settings.api_key)
        return urllib.request.urlopen(request, timeout=timeout)

    def _refused(self, exc: Any) -> WorkerUnavailableError:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        return WorkerUnavailableError(f"the server at {self.url} answered {exc.code}: {message}")


class StoreGateway:
    """Runs ask, search and removal here, or in the process that holds the embedded store (a running
    `spanqa serve`, else a worker).

    Args:
        runtime: this process's components; its index is opened to learn whether another process holds it.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.on_worker = False
        self._client: WorkerClient | None = None
        self._server: ServerClient | None = None

    def warm_up_reader(self) -> None:
        """Load the reader here, unless the questions go to a worker."""
        if not self.held_elsewhere():
            self.runtime.reader.warm_up()

    def ask(self, question: str, options: AskOptions) -> pipeline.AskResult:
        """``pipeline.ask`` here, or in the process that holds the store."""
        if not self.held_elsewhere():
            return pipeline.ask(self.runtime, question, options)
        if self._server is not None:
            data = self._server.call(INTERNAL_ASK, {"question": question, **options.to_dict()})
        else:
            data = self._call(names.ASK, question=question, options=options.to_dict())
        return pipeline.AskResult.from_dict(data)

    def search(self, query: str, options: SearchOptions) -> pipeline.SearchResult:
        """``pipeline.search`` here, or in the process that holds the store."""
        if not self.held_elsewhere():
            return pipeline.search(self.runtime, query, options)
        if self._server is not None:
            data = self._server.call(INTERNAL_SEARCH, {"query": query, **options.to_dict()})
        else:
            data = self._call(names.SEARCH, query=query, options=options.to_dict())
        return pipeline.SearchResult.from_dict(data)

    def remove(self, document_id: str) -> None:
        """Drop a document's points and mark it deleted, here or by the process that holds the store."""
        if not self.held_elsewhere():
            self.runtime.ingest_job().remove_document(document_id)
        elif self._server is not None:
            self._server.call(INTERNAL_REMOVE, {"document_id": document_id})
        else:
            self._call(names.DELETE_DOCUMENT, document_id=document_id)

    @property
    def server(self) -> ServerClient | None:
        """The running `spanqa serve` that holds the store, once ``held_elsewhere`` found one."""
        return self._server

    def held_elsewhere(self) -> bool:
        """Whether another process holds the store and answers for it (a running server, else a worker);
        with neither, this process waits for the store (``store_wait_s``), which raises
        ``VectorIndexInUseError`` when it is still held."""
        if not self.on_worker:
            try:
                self.runtime.index  # noqa: B018 - opening it tells whether another process holds the store
            except VectorIndexInUseError as exc:
                server = running_server(self.runtime.settings)
                if server is not None:
                    logger.info("%s; asking the server at %s", exc, server[0])
                    self._server = ServerClient(self.runtime.settings, *server)
                elif self.runtime.settings.broker_url is None:
                    # Another command (an ingest lends the store to a process that waits): wait for it.
                    self.runtime.wait_for_store()
                    return False
                else:
                    logger.info("%s; asking the worker", exc)
                self.on_worker = True
        return self.on_worker

    def _call(self, task: str, **kwargs: Any) -> Any:
        if self._client is None:
            self._client = WorkerClient(self.runtime.settings)
        try:
            return self._client.call(task, **kwargs)
        except WorkerUnavailableError as exc:
            raise WorkerUnavailableError(f"the vector store is held by another process and {exc}") from exc
