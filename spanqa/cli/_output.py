"""What the CLI prints: the console, one progress-bar factory, JSON (records take their shape from
``spanqa.records``, shared with the HTTP API)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


# Wide enough that nothing is cut or wrapped when the output goes to a pipe or a file.
PIPE_WIDTH = 1_000_000


def console(stderr: bool = False) -> Console:
    """A rich console (stdout, or stderr for progress); no syntax highlighting of numbers and paths.

    Output to a pipe or a file is never cut to a width or wrapped: full paths, one record per line, for
    grep and scripts.
    """
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, highlight=False, width=PIPE_WIDTH, soft_wrap=True)
    return out


def progress_bar(
    label: str,
    *,
    fields: Sequence[str] = (),
    disable: bool = False,
    transient: bool = True,
) -> Progress:
    """A progress bar on stderr: label, bar, done/total, ``fields``, the time elapsed and the time left (once
    a total and a rate are known).

    Args:
        label: rich markup shown first (``{task.description}`` shows the task's description).
        fields: more columns, rich templates such as ``"{task.fields[chunks]} chunks"``.
        disable: no bar (JSON output, or nothing to show); a bar is off anyway when stderr is no terminal.
        transient: clear the bar when done.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    out = console(stderr=True)
    columns = (
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        *(TextColumn(field) for field in fields),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    return Progress(*columns, console=out, transient=transient, disable=disable or not out.is_terminal)


def print_json(data: Any, *, compact: bool = False) -> None:
    """``data`` as JSON on stdout: indented, or one line (``compact``, for a stream of records)."""
    click.echo(json.dumps(data, indent=None if compact else 2, ensure_ascii=False, default=str))


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def where(path: str, page: int | None) -> str:
    """``path`` or ``path:page``."""
    return path + (f":{page}" if page is not None else "")


#: What a passage's score is under each retrieval mode, as the output names it.
PASSAGE_SCORE_NAMES = {"hybrid": "fused", "dense": "cosine", "lexical": "bm25"}


def passage_score(score: float, retrieval: str) -> str:
    """``fused 1.046``: a passage's retrieval score named for what it is (hybrid: the cosine and BM25 lists
    each min-max scaled to 0-1 over the hits, then summed with the BM25 weight, so 2.0 tops both lists)."""
    return f"{PASSAGE_SCORE_NAMES.get(retrieval, 'score')} {score:.3f}"


def say_waiting(message: str) -> None:
    """Tell the user this command waits (for the data folder's store, held by another command)."""
    click.echo(f"{message}...", err=True)


class ProgressLines:
    """Progress as JSON lines on stderr for scripts (``--json``): what a bar shows, at most one line every
    ``every_s`` seconds and always the last.

    Args:
        step: what is being done ("ingest", "ask", ...).
        every_s: the least time between two lines.
    """

    def __init__(self, step: str, *, every_s: float = 1.0) -> None:
        self.step = step
        self.every_s = every_s
        self._started = time.monotonic()
        self._last = float("-inf")

    def update(self, done: int, total: int | None, **fields: Any) -> None:
        """Report ``done`` of ``total`` (None: not known) with more ``fields`` (numbers, words)."""
        now = time.monotonic()
        if now - self._last < self.every_s and done != total:
            return
        self._last = now
        elapsed = now - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = round((total - done) / rate, 1) if total is not None and rate > 0 else None
        line = {"progress": self.step, "done": done, "total": total, "elapsed_s": round(elapsed, 1)}
        click.echo(json.dumps({**line, "eta_s": eta, **fields}), err=True)
