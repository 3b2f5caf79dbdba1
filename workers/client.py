"""Asking through a worker: how a command reaches the process that owns the embedded store."""

from __future__ import annotations

import logging
from typing import Any

from spanqa.settings import Settings

logger = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0


class WorkerUnavailableError(RuntimeError):
    """No worker answered, or none answered in time; the message is one line, fit to show to the user."""


def call_worker(settings: Settings, task: str, *args: Any) -> dict[str, Any]:
    """Run ``task`` (``spanqa.ask`` or ``spanqa.search``) on a running worker and wait for its result.

    Args:
        settings: with ``broker_url`` set.
        task: the task name.
        *args: its arguments (JSON values).

    Returns:
        The task's result: ``AskResult.to_dict()`` or ``SearchResult.to_dict()`` as computed by the worker.

    Raises:
        WorkerUnavailableError: no worker is running, or none answered within ``ask_timeout_s``.
    """
    from celery.exceptions import TimeoutError as ResultTimeout

    from workers.app import create_app

    app = create_app(settings)
    if not app.control.ping(timeout=PING_TIMEOUT_S):
        raise WorkerUnavailableError("no spanqa worker answers on the broker")
    pending = app.send_task(task, args=list(args))
    try:
        data: dict[str, Any] = pending.get(timeout=settings.ask_timeout_s)
    except ResultTimeout:
        pending.forget()
        raise WorkerUnavailableError(
            f"the worker did not answer within {settings.ask_timeout_s:g} s (it may be busy with a large "
            "file): ask again, or raise SPANQA_ASK_TIMEOUT_S"
        ) from None
    return data
