"""The names workers and their callers share: queues and tasks. One owner each; no Celery import here."""

from __future__ import annotations

#: Ingest, delete, re-index and sweep tasks.
QUEUE = "spanqa"
#: Questions go to their own queue, which workers read first: an ask waits for the task in hand, not for the
#: whole ingest backlog.
ASK_QUEUE = "spanqa.ask"
DEFAULT_WORKER_QUEUES = f"{ASK_QUEUE},{QUEUE}"

INGEST_PATH = "spanqa.ingest_path"
INGEST_FILE = "spanqa.ingest_file"
DELETE_DOCUMENT = "spanqa.delete_document"
REINDEX = "spanqa.reindex"
ASK = "spanqa.ask"
SEARCH = "spanqa.search"
SWEEP = "spanqa.sweep"

#: Tasks that answer a waiting caller, routed to ASK_QUEUE.
ANSWERING_TASKS = (ASK, SEARCH)

#: The Redis key prefix of the per-document lock.
DOCUMENT_LOCK_PREFIX = "spanqa:lock:document:"
