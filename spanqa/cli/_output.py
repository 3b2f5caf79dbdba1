"""What the CLI prints: the console, one progress-bar factory, JSON, and the JSON shape of each record."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from spanqa.types import Document, Job, Passage


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
    remaining: bool = False,
    disable: bool = False,
    transient: bool = True,
) -> Progress:
    """A progress bar on stderr: label, bar, done/total, ``fields``, then elapsed (or remaining) time.

    Args:
        label: rich markup shown first (``{task.description}`` shows the task's description).
        fields: more columns, rich templates such as ``"{task.fields[chunks]} chunks"``.
        remaining: show the time left instead of the time elapsed.
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
        TimeRemainingColumn() if remaining else TimeElapsedColumn(),
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


#: How a probability of being right reads in words (the first whose floor it reaches).
CONFIDENCE_WORDS = ((0.8, "likely"), (0.5, "probably"), (0.3, "unsure"), (0.0, "doubtful"))


def confidence(score: float) -> str:
    """A probability as a percentage with a word: ``87% likely``."""
    word = next(word for floor, word in CONFIDENCE_WORDS if score >= floor)
    return f"{score * 100:.0f}% {word}"


def timings_ms(timings: dict[str, float]) -> dict[str, float]:
    """Seconds to milliseconds, rounded for printing."""
    return {k: round(v * 1000, 2) for k, v in timings.items()}


def passage_dict(p: Passage) -> dict[str, Any]:
    return {
        "rank": p.rank,
        "score": round(p.score, 6),
        "path": p.path,
        "page": p.page,
        "char_start": p.char_start,
        "char_end": p.char_end,
        "document_id": p.document_id,
        "chunk_id": p.chunk_id,
        "heading": p.heading,
        "text": p.text,
    }


def document_dict(d: Document) -> dict[str, Any]:
    return {
        "id": d.id,
        "path": d.path,
        "relative_path": d.relative_path,
        "status": d.status.value,
        "format": d.format,
        "pages": d.page_count,
        "chunks": d.num_chunks,
        "size": d.size,
        "sha256": d.sha256,
        "error": d.error,
        "updated_at": d.updated_at.isoformat() if d.updated_at else None,
    }


def job_dict(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "total": job.total,
        "done": job.done,
        "failed": job.failed,
        "error": job.error,
        "arguments": job.arguments,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
    }
