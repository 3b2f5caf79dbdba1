"""The Celery app, configured from Settings. ``celery -A workers.app worker`` or ``spanqa worker`` runs it.

Delivery rules: tasks are acknowledged after they finish (``acks_late``) and given back to the queue when a
worker dies mid-task (``reject_on_worker_lost``); each worker process takes one task at a time.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from spanqa.runtime import Runtime
from spanqa.settings import Settings

logger = logging.getLogger(__name__)

QUEUE = "spanqa"
# Questions go to their own queue, which workers read first: an ask waits for the task in hand, not for the
# whole ingest backlog.
ASK_QUEUE = "spanqa.ask"
DEFAULT_WORKER_QUEUES = f"{ASK_QUEUE},{QUEUE}"


class WorkerState:
    """What one worker process keeps between tasks: its settings and its loaded runtime (models, stores)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime(self.settings)
        return self._runtime

    def warm_up(self) -> None:
        """Load the encoder and open the stores once per process, before the first task."""
        self.runtime.encoder.warm_up()
        self.runtime.catalog  # noqa: B018 - opening the catalog creates its tables
        self.runtime.index  # noqa: B018 - takes the embedded store's lock for this process

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None


def create_app(settings: Settings | None = None) -> Celery:
    """A Celery app for ``settings``; with no broker URL, tasks run inline (eagerly) in the caller."""
    settings = settings or Settings.load()
    app = Celery("spanqa", broker=settings.broker_url or "memory://")
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        # Only asks return results (their tasks set ignore_result=False); they expire once read or unread.
        result_backend=settings.broker_url,
        result_expires=600,
        task_ignore_result=True,
        task_routes={"spanqa.ask": {"queue": ASK_QUEUE}, "spanqa.search": {"queue": ASK_QUEUE}},
        task_default_queue=QUEUE,
        task_always_eager=settings.broker_url is None,
        task_eager_propagates=True,
        broker_connection_retry_on_startup=True,
        # A task whose worker died unacknowledged goes back to the queue after this long.
        broker_transport_options={
            "visibility_timeout": settings.broker_visibility_timeout_s,
            "queue_order_strategy": "priority",
        },
        worker_hijack_root_logger=False,
        beat_schedule={"sweep": {"task": "spanqa.sweep", "schedule": settings.sweep_interval_s}},
    )
    state = WorkerState(settings)
    app.spanqa_state = state
    from workers.tasks import register_tasks

    register_tasks(app)
    if settings.broker_url is not None:
        # Models load once per worker process, before its first task; never per task.
        worker_process_init.connect(lambda **_: state.warm_up(), weak=False)
        worker_process_shutdown.connect(lambda **_: state.close(), weak=False)
    return app


def state_of(app: Celery) -> WorkerState:
    state: WorkerState = app.spanqa_state
    return state


_default: list[Celery] = []


def __getattr__(name: str) -> Any:
    """``workers.app.app`` for ``celery -A workers.app``: built from the environment on first access."""
    if name == "app":
        if not _default:
            _default.append(create_app())
        return _default[0]
    raise AttributeError(name)
