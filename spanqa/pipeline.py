"""The jobs that join the stages: search (retriever only) and ask (retriever, reader, answers).

This module orchestrates; the reader's post-processing (scores, duplicates, context) is
:class:`reader.answers.AnswerBuilder`'s."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spanqa.ingest.catalog import Catalog
from spanqa.ingest.model_check import check_model
from spanqa.ingest.walk import matches
from spanqa.reader.answers import AnswerBuilder, read_passages
from spanqa.retriever.retriever import Retriever
from spanqa.runtime import EmptyIndexError, Runtime
from spanqa.types import (
    Answer,
    AnswerSource,
    AskOptions,
    DocumentStatus,
    Passage,
    PassageCopy,
    SearchOptions,
)


@dataclass
class SearchResult:
    """Passages, best first, and where time went."""

    passages: list[Passage]
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (a worker sends this back to the asking process)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchResult:
        """The inverse of ``to_dict``."""
        return cls([passage_from_dict(p) for p in data["passages"]], dict(data.get("timings", {})))


def passage_from_dict(data: dict[str, Any]) -> Passage:
    """A Passage from ``dataclasses.asdict`` output sent through JSON (lists back to tuples)."""
    segments = tuple((int(a), int(b)) for a, b in data.get("segments") or ())
    copies = tuple(PassageCopy(**c) for c in data.get("copies") or ())
    return Passage(**{**data, "segments": segments, "copies": copies})


def documents_matching(catalog: Catalog, path_glob: str) -> list[str]:
    """Ids of indexed documents whose relative or absolute path matches ``path_glob``."""
    return [
        d.id
        for d in catalog.list_documents(status=DocumentStatus.INDEXED)
        if matches(d.relative_path, [path_glob]) or matches(d.path, [path_glob])
    ]


def retriever_for(runtime: Runtime) -> Retriever:
    """The retriever over the active collection; refuses a model that differs from the indexed one."""
    active = runtime.catalog.active_index()
    if active is None:
        raise EmptyIndexError(
            f"nothing is indexed yet in {runtime.settings.data_dir}: run `spanqa ingest PATH` first"
        )
    settings = runtime.settings
    check_model(active, settings.retriever_model, settings.pooling)
    return Retriever(
        encoder=runtime.encoder,
        index=runtime.index,
        collection=active.collection,
        mode=settings.retrieval,
        fusion=settings.fusion,
        lexical_weight=settings.lexical_weight,
        fold=settings.fold_similarity <= 1,
    )


def search(
    runtime: Runtime,
    query: str,
    options: SearchOptions | None = None,
    *,
    document_ids: Sequence[str] | None = None,
) -> SearchResult:
    """The passages nearest to ``query``, best first, with their text and document offsets.

    Args:
        runtime: the opened components.
        query: the search text.
        options: how many passages (default: the ``search_top_k`` setting), from which documents.
        document_ids: only these documents.

    Returns:
        Passages and a timing breakdown (encode, search, hydrate) in seconds.
    """
    options = options or SearchOptions()
    top_k = options.top_k or runtime.settings.search_top_k
    path_glob = options.path_glob
    retriever = retriever_for(runtime)
    ids = list(document_ids) if document_ids is not None else None
    if path_glob:
        matching = documents_matching(runtime.catalog, path_glob)
        ids = matching if ids is None else [i for i in ids if i in set(matching)]
    if ids is not None and not ids:
        return SearchResult([], {"encode": 0.0, "search": 0.0, "hydrate": 0.0})
    result = retriever.run(query, top_k=top_k, document_ids=ids)
    started = time.perf_counter()
    folded = [copy for hit in result.hits for copy in result.copies.get(hit.id, ())]
    chunks = runtime.catalog.get_chunks(hit.id for hit in [*result.hits, *folded])
    passages: list[Passage] = []
    for best in result.hits:
        # A point without its catalog row (left by a crash, or written by an ingest not yet committed) is
        # skipped; the best of its group's copies that has one stands in for it.
        group = [h for h in (best, *result.copies.get(best.id, ())) if h.id in chunks]
        if not group:
            continue
        hit, chunk = group[0], chunks[group[0].id]
        dense, lexical = result.dense.get(hit.id), result.lexical.get(hit.id)
        copies = tuple(
            PassageCopy(
                chunk_id=c.id,
                document_id=c.document_id,
                path=str(copy.payload.get("path", "")),
                char_start=c.char_start,
                char_end=c.char_end,
                text=c.text,
                page=c.page,
            )
            for copy, c in ((h, chunks[h.id]) for h in group[1:])
        )
        passages.append(
            Passage(
                chunk_id=chunk.id,
                document_id=chunk.document_id,
                path=str(hit.payload.get("path", "")),
                text=chunk.text,
                char_start=chunk.char_start,
                char_end=chunk.char_end,
                score=best.score,
                page=chunk.page,
                ordinal=chunk.ordinal,
                rank=len(passages) + 1,
                heading=chunk.heading,
                segments=chunk.segments,
                title=chunk.title,
                title_start=chunk.title_start,
                dense_score=dense.score if dense else None,
                dense_rank=dense.rank if dense else None,
                lexical_score=lexical.score if lexical else None,
                lexical_rank=lexical.rank if lexical else None,
                copies=copies,
            )
        )
    timings = {
        "encode": result.encode_seconds,
        "search": result.search_seconds,
        "hydrate": time.perf_counter() - started,
    }
    return SearchResult(passages, timings)


# Ask ------------------------------------------------------------------------------------------------------


@dataclass
class AskResult:
    """Answers (best first), or none when the reader abstained; the passages read and where time went."""

    question: str
    answers: list[Answer]
    passages: list[Passage]
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def abstained(self) -> bool:
        return not self.answers

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON-ready values (a worker sends this back to the asking process)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AskResult:
        """The inverse of ``to_dict``."""
        answers = [
            Answer(
                **{
                    **a,
                    "passage": passage_from_dict(a["passage"]),
                    "also_in": tuple(AnswerSource(**s) for s in a.get("also_in", ())),
                }
            )
            for a in data["answers"]
        ]
        passages = [passage_from_dict(p) for p in data["passages"]]
        return cls(
            data["question"], answers, passages, dict(data.get("timings", {})), list(data.get("warnings", []))
        )


def ask(
    runtime: Runtime,
    question: str,
    options: AskOptions | None = None,
    *,
    found: SearchResult | None = None,
) -> AskResult:
    """Answer ``question`` with exact spans of the indexed documents.

    Args:
        runtime: the opened components.
        question: the question.
        options: how many passages to read and answers to give, the least score shown, which documents
            (each None: its setting).
        found: passages already retrieved for ``question`` (evaluation retrieves more than it reads).

    Returns:
        Answers whose text equals ``document.text[char_start:char_end]``, each scored by the probability
        that it is right; none when no span beats "no answer" by more than the ``no_answer_threshold``
        setting, or none is likely enough (``min_score``).
    """
    settings = runtime.settings
    options = options or AskOptions()
    n_passages = options.passages or settings.passages
    started = time.perf_counter()
    if found is None:
        found = search(runtime, question, SearchOptions(top_k=n_passages, path_glob=options.path_glob))
    else:
        found = SearchResult(found.passages[:n_passages], found.timings)
    timings = {
        "encode": found.timings["encode"],
        "search": found.timings["search"] + found.timings["hydrate"],
    }
    if not found.passages:
        timings["read"] = 0.0
        timings["total"] = time.perf_counter() - started
        return AskResult(question, [], [], timings)
    runtime.reader.warm_up()  # loading (and a first ONNX export) is not reading: keep it out of the timing
    read_started = time.perf_counter()
    result = read_passages(runtime.reader, question, found.passages)
    timings["read"] = time.perf_counter() - read_started
    # The pages of the documents with pages, the copies' too (an answer may be listed in one of them).
    paged = [p.document_id for p in found.passages if p.page is not None]
    paged += [c.document_id for p in found.passages for c in p.copies if c.page is not None]
    pages = runtime.catalog.page_starts(paged)
    builder = AnswerBuilder.from_settings(
        settings, answers=options.answers, min_score=options.min_score, calibrator=runtime.calibrator
    )
    picked = builder.run(result, found.passages, pages, question)
    timings["total"] = time.perf_counter() - started
    warnings = []
    calibration = runtime.calibration_warning()
    if calibration:
        warnings.append(calibration)
    if result.question_cut:
        warnings.append(
            f"the question is longer than the reader reads ({settings.max_question_tokens} tokens): "
            "only its start was used"
        )
    return AskResult(question, picked, found.passages, timings, warnings)
