"""What one worker process keeps between tasks, handed to the tasks when they are registered."""

from __future__ import annotations

from spanqa.runtime import Runtime
from spanqa.settings import Settings


class WorkerState:
    """A worker process's settings and its loaded runtime (models, stores), opened on first use.

    Args:
        settings: what the runtime is built from.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime(self.settings, holds_store=True)
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
