"""The jobs that join the stages: search (retriever only) and ask (retriever + reader)."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ingest.catalog import Catalog
from ingest.job import check_model
from ingest.walk import matches
from reader.squad import normalize_answer
from retriever.lexical import min_max
from retriever.retriever import Retriever
from spanqa.errors import SpanqaError
from spanqa.runtime import Runtime
from spanqa.types import Answer, DocumentStatus, Passage, page_at

if TYPE_CHECKING:
    from reader.reader import ExtractiveReader, ReaderResult

logger = logging.getLogger(__name__)


class EmptyIndexError(SpanqaError):
    """Nothing has been ingested yet."""


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
    return Passage(**{**data, "segments": segments})


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
        raise EmptyIndexError("nothing is indexed yet: run `spanqa ingest PATH` first")
    settings = runtime.settings
    check_model(active.model_name, settings.retriever_model)
    return Retriever(
        encoder=runtime.encoder,
        index=runtime.index,
        collection=active.collection,
        mode=settings.retrieval,
        fusion=settings.fusion,
        lexical_weight=settings.lexical_weight,
    )


def search(
    runtime: Runtime,
    query: str,
    *,
    top_k: int = 10,
    path_glob: str | None = None,
    document_ids: Sequence[str] | None = None,
) -> SearchResult:
    """The passages nearest to ``query``, best first, with their text and document offsets.

    Args:
        runtime: the opened components.
        query: the search text.
        top_k: how many passages.
        path_glob: only documents whose path matches this glob.
        document_ids: only these documents.

    Returns:
        Passages and a timing breakdown (encode, search, hydrate) in seconds.
    """
    retriever = retriever_for(runtime)
    ids = list(document_ids) if document_ids is not None else None
    if path_glob:
        matching = documents_matching(runtime.catalog, path_glob)
        ids = matching if ids is None else [i for i in ids if i in set(matching)]
    if ids is not None and not ids:
        return SearchResult([], {"encode": 0.0, "search": 0.0, "hydrate": 0.0})
    result = retriever.run(query, top_k=top_k, document_ids=ids)
    started = time.perf_counter()
    chunks = runtime.catalog.get_chunks(hit.id for hit in result.hits)
    passages: list[Passage] = []
    for hit in result.hits:
        chunk = chunks.get(hit.id)
        if chunk is None:
            # A point without its catalog row: left by a crash, removed by the next ingest.
            continue
        passages.append(
            Passage(
                chunk_id=chunk.id,
                document_id=chunk.document_id,
                path=str(hit.payload.get("path", "")),
                text=chunk.text,
                char_start=chunk.char_start,
                char_end=chunk.char_end,
                score=hit.score,
                page=chunk.page,
                ordinal=chunk.ordinal,
                rank=len(passages) + 1,
                heading=chunk.heading,
                segments=chunk.segments,
                title=chunk.title,
                title_start=chunk.title_start,
            )
        )
    timings = {
        "encode": result.encode_seconds,
        "search": result.search_seconds,
        "hydrate": time.perf_counter() - started,
    }
    return SearchResult(passages, timings)


# Ask ------------------------------------------------------------------------------------------------------

# Retriever scores are min-max scaled to [0, 1] over the passages read (cosine, BM25 and fused scores alike)
# and span scores are sums of two logits (roughly -10..20): this scale puts both on one footing before they
# are mixed by the retriever_weight setting (BERTserini-style).
RETRIEVER_LOGIT_SCALE = 20.0


@dataclass
class AskResult:
    """Answers (best first), or none when the reader abstained; the passages read and where time went."""

    question: str
    answers: list[Answer]
    passages: list[Passage]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def abstained(self) -> bool:
        return not self.answers

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON-ready values (a worker sends this back to the asking process)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AskResult:
        """The inverse of ``to_dict``."""
        answers = [Answer(**{**a, "passage": passage_from_dict(a["passage"])}) for a in data["answers"]]
        passages = [passage_from_dict(p) for p in data["passages"]]
        return cls(data["question"], answers, passages, dict(data.get("timings", {})))


def combine_scores(reader_score: float, retriever_score: float, weight: float) -> float:
    """Mix the reader's span logits with the retriever's score scaled to [0, 1] (weight 0: reader only)."""
    return (1.0 - weight) * reader_score + weight * RETRIEVER_LOGIT_SCALE * retriever_score


@dataclass(frozen=True)
class ReaderInput:
    """What the reader reads of one passage: its heading path, its entry's title, then its text.

    Attributes:
        text: the text read.
        segments: where in ``text`` an answer may lie (the title and each block of the passage, never the
            heading path): a span lies inside one of them.
        regions: (start, end, document offset) of each piece of ``text`` that is document text.
    """

    text: str
    segments: list[tuple[int, int]]
    regions: list[tuple[int, int, int]]

    def document_offset(self, offset: int) -> int:
        """The document offset of a position of ``text`` that lies in one of its regions."""
        for start, end, document_start in self.regions:
            if start <= offset <= end:
                return document_start + offset - start
        raise ValueError(f"offset {offset} is not document text")


def reader_input(passage: Passage) -> ReaderInput:
    """The text the reader reads for ``passage`` and where its answerable parts come from."""
    parts: list[str] = []
    segments: list[tuple[int, int]] = []
    regions: list[tuple[int, int, int]] = []
    position = 0
    if passage.heading:
        parts.append(passage.heading + "\n")
        position += len(parts[-1])
    if passage.title and passage.title_start is not None:
        segments.append((position, position + len(passage.title)))
        regions.append((position, position + len(passage.title), passage.title_start))
        parts.append(passage.title + "\n")
        position += len(parts[-1])
    blocks = passage.segments or ((0, len(passage.text)),)
    segments.extend((position + a, position + b) for a, b in blocks)
    regions.append((position, position + len(passage.text), passage.char_start))
    parts.append(passage.text)
    return ReaderInput("".join(parts), segments, regions)


def answer_context(text: str, start: int, end: int) -> tuple[str, int]:
    """The sentence(s) of ``text`` around ``[start, end)`` and where they start."""
    from ingest.chunker import sentence_spans

    spans = sentence_spans(text)
    first = next((s for s in spans if s[0] <= start < s[1]), (start, end))
    last = next((s for s in spans if s[0] < end <= s[1]), first)
    return text[first[0] : max(last[1], end)], first[0]


def ask(
    runtime: Runtime,
    question: str,
    *,
    passages: int | None = None,
    answers: int | None = None,
    path_glob: str | None = None,
    found: SearchResult | None = None,
) -> AskResult:
    """Answer ``question`` with exact spans of the indexed documents.

    Args:
        runtime: the opened components.
        question: the question.
        passages: how many passages the reader reads (default: the ``passages`` setting).
        answers: how many answers to return at most (default: the ``answers`` setting).
        path_glob: only documents whose path matches this glob.
        found: passages already retrieved for ``question`` (evaluation retrieves more than it reads).

    Returns:
        Answers whose text equals ``document.text[char_start:char_end]``, scored 0..1; none when the reader
        found no span better than "no answer" by more than the ``no_answer_threshold`` setting.
    """
    settings = runtime.settings
    n_passages = passages or settings.passages
    n_answers = answers or settings.answers
    started = time.perf_counter()
    if found is None:
        found = search(runtime, question, top_k=n_passages, path_glob=path_glob)
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
    pages = runtime.catalog.page_starts(p.document_id for p in found.passages if p.page is not None)
    picked = pick_answers(
        result,
        found.passages,
        retriever_weight=settings.retriever_weight,
        no_answer_threshold=settings.no_answer_threshold,
        answers=n_answers,
        page_starts=pages,
    )
    timings["total"] = time.perf_counter() - started
    return AskResult(question, picked, found.passages, timings)


def read_passages(reader: ExtractiveReader, question: str, passages: Sequence[Passage]) -> ReaderResult:
    """The reader's spans for ``question`` over ``passages``, each read behind its heading path.

    Span offsets are relative to ``passage.char_start`` in the document: inside the passage, or before it
    for a span of its entry's title (``Passage.text_at`` reads either); never in the heading path, never
    across a block boundary.
    """
    inputs = [reader_input(p) for p in passages]
    result = reader.run(question, [i.text for i in inputs], [i.segments for i in inputs])
    spans = []
    for span in result.spans:
        read, passage = inputs[span.passage_index], passages[span.passage_index]
        start = read.document_offset(span.char_start) - passage.char_start
        end = read.document_offset(span.char_end) - passage.char_start
        spans.append(dataclasses.replace(span, char_start=start, char_end=end))
    result.spans = spans
    return result


def pick_answers(
    result: ReaderResult,
    passages: Sequence[Passage],
    *,
    retriever_weight: float,
    no_answer_threshold: float,
    answers: int,
    page_starts: dict[str, list[tuple[int, int]]] | None = None,
) -> list[Answer]:
    """The best answers of a reading: span and retriever evidence mixed, duplicates dropped, best first.

    Args:
        result: what ``read_passages`` returned for these passages.
        passages: the passages read, in the order read.
        retriever_weight: how much the retriever's score (min-max scaled over the passages) counts.
        no_answer_threshold: spans that beat "no answer" by this many logits or less are dropped.
        answers: how many answers at most.
        page_starts: per document id, its (page, offset) starts, to give each answer its page.

    Returns:
        Answers whose text equals ``document.text[char_start:char_end]``, scored 0..1 against each other
        and "no answer".
    """
    pages = page_starts or {}
    retrieval = min_max({str(i): p.score for i, p in enumerate(passages)})
    scored = []
    for span in result.spans:
        if span.margin <= no_answer_threshold:
            continue
        passage = passages[span.passage_index]
        combined = combine_scores(span.score, retrieval[str(span.passage_index)], retriever_weight)
        scored.append((combined, span, passage))
    scored.sort(key=lambda item: item[0], reverse=True)
    null_logit = combine_scores(result.null_score, 1.0, retriever_weight)
    normalizer = _logsumexp([s for s, _, _ in scored] + [null_logit])
    picked: list[Answer] = []
    for combined, span, passage in scored:
        doc_start = passage.char_start + span.char_start
        doc_end = passage.char_start + span.char_end
        text = passage.text_at(doc_start, doc_end)
        if any(
            (a.document_id == passage.document_id and doc_start < a.char_end and a.char_start < doc_end)
            or normalize_answer(a.text) == normalize_answer(text)
            for a in picked
        ):
            continue  # the same words again: through an overlapping chunk, or elsewhere in the documents
        if span.char_start >= 0:
            context, context_start = answer_context(passage.text, span.char_start, span.char_end)
            context_start += passage.char_start
        else:  # the entry's title: the term is its own context
            context = passage.title
            context_start = passage.title_start if passage.title_start is not None else doc_start
        picked.append(
            Answer(
                text=text,
                score=math.exp(combined - normalizer),
                path=passage.path,
                document_id=passage.document_id,
                char_start=doc_start,
                char_end=doc_end,
                page=page_at(pages[passage.document_id], doc_start) if passage.document_id in pages else None,
                passage=passage,
                reader_score=span.score,
                retriever_score=passage.score,
                context=context,
                context_start=context_start,
            )
        )
        if len(picked) >= answers:
            break
    return picked


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
