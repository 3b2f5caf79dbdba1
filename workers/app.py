"""The Celery app, configured from Settings. ``celery -A spanqa.workers.app worker`` or ``spanqa worker``
runs it.

Delivery rules: tasks are acknowledged after they finish (``acks_late``) and given back to the queue when a
worker dies mid-task (``reject_on_worker_lost``); each worker process takes one task at a time.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from spanqa.settings import Settings
from spanqa.workers import names
from spanqa.workers.state import WorkerState
from spanqa.workers.tasks import register_tasks


def create_app(settings: Settings | None = None, state: WorkerState | None = None) -> Celery:
    """A Celery app for ``settings``; with no broker URL, tasks run inline (eagerly) in the caller.

    Args:
        settings: default: loaded from the environment and ``spanqa.toml``.
        state: what the tasks run with (default: a new one for ``settings``); its owner closes it.
    """
    settings = settings or Settings.load()
    app = Celery("spanqa", broker=settings.broker_url or "memory://")
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        # Only asks and removals return results (ignore_result=False); they expire once read or unread.
        result_backend=settings.broker_url,
        result_expires=600,
        task_ignore_result=True,
        task_routes={task: {"queue": names.ASK_QUEUE} for task in names.ANSWERING_TASKS},
        task_default_queue=names.QUEUE,
        task_always_eager=settings.broker_url is None,
        task_eager_propagates=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options=_transport_options(settings.broker_visibility_timeout_s),
        worker_hijack_root_logger=False,
        beat_schedule={"sweep": {"task": names.SWEEP, "schedule": settings.sweep_interval_s}},
    )
    state = state or WorkerState(settings)
    register_tasks(app, state)
    if settings.broker_url is not None:
        # Models load once per worker process, before its first task; never per task.
        worker_process_init.connect(lambda **_: state.warm_up(), weak=False)
        worker_process_shutdown.connect(lambda **_: state.close(), weak=False)
    return app


_default: list[Celery] = []


def __getattr__(name: str) -> Any:
    """``spanqa.workers.app.app`` for ``celery -A spanqa.workers.app``: built from the environment on first
    access."""
    if name == "app":
        if not _default:
            _default.append(create_app())
        return _default[0]
    raise AttributeError(name)


def _transport_options(visibility_timeout_s: float) -> dict[str, Any]:
    """Redis transport options: a task whose worker died unacknowledged goes back to the queue once
    ``visibility_timeout_s`` has passed.

    kombu looks for such tasks only on every 10th tick of a 10-second timer, and the lock a worker takes
    while it looks lasts 5 minutes if that worker is killed holding it: a task could wait minutes past its
    timeout. Every tick looks here, ticks come at most 10 s apart (half the timeout when that is shorter),
    and the lock lasts a minute.
    """
    return {
        "visibility_timeout": visibility_timeout_s,
        "unacked_restore_interval": max(1, min(10, int(visibility_timeout_s // 2))),
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": 60,
        "queue_order_strategy": "priority",
    }
