"""Celery tasks: thin wrappers that run the ingest job in a worker, idempotent and safe to retry."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from celery import Celery, Task

from spanqa.ingest.catalog import document_id_for
from spanqa.ingest.job import PathNotFoundError
from spanqa.ingest.report import FAILED
from spanqa.ingest.walk import FoundFile
from spanqa.types import AskOptions, SearchOptions
from spanqa.workers import names
from spanqa.workers.state import WorkerState


def transient_errors() -> tuple[type[BaseException], ...]:
    """Errors worth retrying: lost connections to the database, Qdrant or Redis."""
    import redis.exceptions
    from sqlalchemy.exc import DBAPIError, OperationalError

    from spanqa.ingest.db import CatalogUnavailableError
    from spanqa.retriever.index import VectorIndexUnavailableError

    return (
        CatalogUnavailableError,
        OperationalError,
        DBAPIError,
        redis.exceptions.ConnectionError,
        VectorIndexUnavailableError,
        ConnectionError,
        TimeoutError,
    )


def register_tasks(app: Celery, state: WorkerState) -> None:
    """Define the tasks (named in :mod:`workers.names`) on ``app``; they run with ``state``'s runtime."""
    retry = {
        "shared": False,
        "autoretry_for": transient_errors(),
        "retry_backoff": 2,
        "retry_backoff_max": 300,
        "retry_jitter": True,
        "max_retries": 8,
    }

    @app.task(name=names.INGEST_PATH, bind=True, **retry)
    def ingest_path(
        self: Task,
        job_id: str,
        paths: Sequence[str],
        prune: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        confine_to: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Find the files under ``paths`` and fan out one ``ingest_file`` task per file (``confine_to``:
        folders that symlinks may not lead out of, as ``spanqa serve`` asks)."""
        runtime = state.runtime
        job = runtime.ingest_job()
        try:
            found = job.discover(
                paths, include=include, exclude=exclude, confine_to=[Path(root) for root in confine_to]
            )
        except PathNotFoundError as exc:
            runtime.catalog.update_job(job_id, state="failed", error=str(exc))
            return {"files": 0}
        runtime.catalog.update_job(job_id, state="running", total=len(found))
        for item in found:
            ingest_file.delay(job_id, str(item.path), str(item.root))
        if prune:
            job.prune(paths)
        if not found:
            runtime.catalog.update_job(job_id, state="done")
        return {"files": len(found)}

    @app.task(name=names.INGEST_FILE, bind=True, **retry)
    def ingest_file(self: Task, job_id: str | None, path: str, root: str) -> dict[str, Any]:
        """Ingest one file; a second delivery of the same file finds it unchanged and does nothing."""
        runtime = state.runtime
        with document_lock(app, document_id_for(path), state.settings.document_lock_timeout_s) as acquired:
            if not acquired:
                raise self.retry(countdown=5, max_retries=60)
            report = runtime.ingest_job().run_found([FoundFile(path=Path(path), root=Path(root))])
        outcome = report.outcomes[0] if report.outcomes else None
        failed = outcome is not None and outcome.status == FAILED
        if job_id:
            runtime.catalog.advance_job(job_id, done=0 if failed else 1, failed=1 if failed else 0)
        return {"path": path, "status": outcome.status if outcome else "skipped"}

    # Its result is kept: `spanqa docs remove` waits for it while a worker holds the store.
    @app.task(name=names.DELETE_DOCUMENT, bind=True, ignore_result=False, **retry)
    def delete_document(self: Task, document_id: str) -> None:
        """Drop a document's points and mark it deleted (deleting twice is harmless)."""
        runtime = state.runtime
        with document_lock(app, document_id, state.settings.document_lock_timeout_s):
            runtime.ingest_job().remove_document(document_id)

    @app.task(name=names.REINDEX, bind=True, **retry)
    def reindex(self: Task, job_id: str | None, retriever_model: str | None = None) -> dict[str, Any]:
        """Blue/green rebuild of the vector collection from the catalog."""
        from spanqa.ingest.reindex import reindex as run_reindex
        from spanqa.retriever.encoder import SentenceEncoder

        runtime = state.runtime
        encoder = runtime.encoder
        if retriever_model and retriever_model != encoder.model_name:
            encoder = SentenceEncoder.from_settings(runtime.settings.replace(retriever_model=retriever_model))
        if job_id:
            runtime.catalog.update_job(job_id, state="running", total=runtime.catalog.counts()["chunks"])
        report = run_reindex(
            catalog=runtime.catalog,
            encoder=encoder,
            index=runtime.index,
            hnsw_build_at=runtime.settings.hnsw_build_at,
            on_progress=(lambda done, total: runtime.catalog.update_job(job_id, done=done))
            if job_id
            else None,
        )
        if job_id:
            runtime.catalog.update_job(job_id, state="done", done=report.chunks)
        return {"collection": report.current.collection, "chunks": report.chunks}

    @app.task(name=names.ASK, shared=False, ignore_result=False, acks_late=False)
    def ask(question: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer on the worker that owns the embedded store (its reader stays loaded between questions);
        ``options`` is ``AskOptions.to_dict()``.

        Not retried and acknowledged on receipt: the asker waits with a timeout and can simply ask again.
        """
        from spanqa import pipeline

        result = pipeline.ask(state.runtime, question, AskOptions.from_dict(options or {}))
        return result.to_dict()

    @app.task(name=names.SEARCH, shared=False, ignore_result=False, acks_late=False)
    def search(query: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Retriever-only search on the worker that owns the embedded store; ``options`` is
        ``SearchOptions.to_dict()``."""
        from spanqa import pipeline

        result = pipeline.search(state.runtime, query, SearchOptions.from_dict(options or {}))
        return result.to_dict()

    @app.task(name=names.SWEEP, bind=True, **retry)
    def sweep(self: Task) -> int:
        """Re-scan every watched folder: new and changed files are ingested, vanished ones pruned."""
        runtime = state.runtime
        folders = runtime.catalog.watched_folders()
        for folder in folders:
            job = runtime.catalog.create_job("sweep", folder)
            ingest_path.delay(job.id, [folder["path"]], True, folder["include"], folder["exclude"])
        return len(folders)


@contextlib.contextmanager
def document_lock(app: Celery, document_id: str, timeout_s: float) -> Iterator[bool]:
    """A Redis lock per document so two workers never index one document at once (a no-op inline).

    The lock expires after ``timeout_s`` on its own, so a worker killed while holding it blocks the document
    only for a while.
    """
    broker = app.conf.broker_url or ""
    if app.conf.task_always_eager or not broker.startswith(("redis://", "rediss://")):
        yield True
        return
    import redis

    client = redis.Redis.from_url(broker)
    lock = client.lock(f"{names.DOCUMENT_LOCK_PREFIX}{document_id}", timeout=timeout_s, blocking_timeout=10)
    acquired = lock.acquire()
    try:
        yield bool(acquired)
    finally:
        if acquired:
            with contextlib.suppress(Exception):
                lock.release()
