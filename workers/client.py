"""Asking through a worker: how a command reaches the process that owns the embedded store."""

from __future__ import annotations

from typing import Any

from spanqa.errors import SpanqaError
from spanqa.settings import Settings

PING_TIMEOUT_S = 2.0


class WorkerUnavailableError(SpanqaError):
    """No worker answered, or none answered in time; the message is one line, fit to show to the user."""


class WorkerClient:
    """Runs ``spanqa.ask`` / ``spanqa.search`` on a running worker and waits for the result.

    Args:
        settings: with ``broker_url`` set; ``ask_timeout_s`` bounds each wait.
    """

    def __init__(self, settings: Settings) -> None:
        from workers.app import create_app

        self.settings = settings
        self.app = create_app(settings)
        self._seen_worker = False

    def call(self, task: str, *args: Any) -> dict[str, Any]:
        """Run ``task`` with ``args`` (JSON values) on a worker; return its result.

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
        pending = self.app.send_task(task, args=list(args))
        try:
            data: dict[str, Any] = pending.get(timeout=self.settings.ask_timeout_s)
        except ResultTimeout:
            pending.forget()
            raise WorkerUnavailableError(
                f"the worker did not answer within {self.settings.ask_timeout_s:g} s (it may be busy with a "
                "large file): ask again, or raise SPANQA_ASK_TIMEOUT_S"
            ) from None
        return data
