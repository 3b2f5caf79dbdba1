"""The JSON shape of each record, shared by the CLI's ``--json`` and the HTTP API (one owner, no drift)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spanqa.pipeline import AskResult, SearchResult
    from spanqa.types import Answer, Chunk, Document, Job, Passage, Place


#: How a probability of being right reads in words (the first whose floor it reaches); the web page gets
#: them from here too.
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
        # Near-duplicates folded into it (not read again): where they are.
        "copies": [
            {
                "path": c.path,
                "page": c.page,
                "char_start": c.char_start,
                "char_end": c.char_end,
                "document_id": c.document_id,
                "chunk_id": c.chunk_id,
            }
            for c in p.copies
        ],
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


def document_detail(d: Document, chunks: Sequence[Chunk], *, with_text: bool) -> dict[str, Any]:
    """One document with its chunks' places (``docs show --json``, ``GET /documents/{id}``)."""
    data = document_dict(d)
    data["chunks"] = [
        {"id": c.id, "ordinal": c.ordinal, "char_start": c.char_start, "char_end": c.char_end, "page": c.page}
        for c in chunks
    ]
    if with_text:
        data["text"] = d.text
    return data


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


def ask_record(result: AskResult, *, places: Callable[[Answer], Place] | None = None) -> dict[str, Any]:
    """One asked question: its answers (best first), the passages read, timings and warnings.

    Args:
        result: what ``pipeline.ask`` returned.
        places: where an answer lies in its file (``ingest.positions.Places.of_answer``): each answer gets
            ``line`` and ``column`` (where its format has lines; None for a PDF, a DOCX, a man page...) and
            ``page_label`` (its page's printed label, where known) beside its offsets into the extracted
            text and its physical ``page``.
    """
    answers = []
    for a in result.answers:
        record = a.to_dict()
        if places is not None:
            place = places(a)
            record.update(line=place.line, column=place.column, page_label=place.page_label)
        answers.append(record)
    return {
        "question": result.question,
        "abstained": result.abstained,
        "answers": answers,
        "passages": [passage_dict(p) for p in result.passages],
        "timings_ms": timings_ms(result.timings),
        "warnings": result.warnings,
    }


def search_record(query: str, result: SearchResult) -> dict[str, Any]:
    """One search: the passages, best first, and timings."""
    return {
        "query": query,
        "passages": [passage_dict(p) for p in result.passages],
        "timings_ms": timings_ms(result.timings),
    }
