"""The reader's post-processing: from spans over the passages read to answers in the documents.

What the reader reads of a passage (its heading path, its entry's title, then its text, with the parts an
answer may come from), and how a reading becomes answers: span and retriever evidence mixed, overlapping
and repeated answers dropped, offsets mapped back into the document, each answer with its page and the
sentence around it. Haystack's ExtractiveReader does the same steps inside its ``run()``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spanqa.reader.calibration import Calibrator, Candidate, QuestionCues, features, question_cues
from spanqa.reader.squad import answer_key
from spanqa.scoring import logsumexp, min_max
from spanqa.text import sentence_spans
from spanqa.types import Answer, AnswerSource, Passage, page_at, prefixed

if TYPE_CHECKING:
    from spanqa.reader.decoding import SpanCandidate
    from spanqa.reader.reader import ExtractiveReader, ReaderResult
    from spanqa.settings import Settings

# Retriever scores are min-max scaled to [0, 1] over the passages read (cosine, BM25 and fused scores alike)
# and span scores are sums of two logits (roughly -10..20): this scale puts both on one footing before they
# are mixed by the retriever_weight setting (BERTserini-style).
RETRIEVER_LOGIT_SCALE = 20.0


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

    def answer_offset(self, start: int, end: int) -> int | None:
        """Where the document text at [start, end) stands in ``text`` when it lies inside one segment (an
        answer the reader could give); None when it is not read, or not answerable there."""
        for region_start, region_end, document_start in self.regions:
            if document_start <= start <= end <= document_start + region_end - region_start:
                at = region_start + start - document_start
                if any(a <= at and at + end - start <= b for a, b in self.segments):
                    return at
        return None


def reader_input(passage: Passage) -> ReaderInput:
    """The text the reader reads for ``passage`` and where its answerable parts come from."""
    title_start = passage.title_start
    title = passage.title if title_start is not None else ""
    joined = prefixed(passage.heading, title, passage.text)
    segments: list[tuple[int, int]] = []
    regions: list[tuple[int, int, int]] = []
    if title and title_start is not None:
        end = joined.title_start + len(title)
        segments.append((joined.title_start, end))
        regions.append((joined.title_start, end, title_start))
    body = joined.body_start
    blocks = passage.segments or ((0, len(passage.text)),)
    segments.extend((body + a, body + b) for a, b in blocks)
    regions.append((body, body + len(passage.text), passage.char_start))
    return ReaderInput(joined.text, segments, regions)


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


def combine_scores(reader_score: float, retriever_score: float, weight: float) -> float:
    """Mix the reader's span logits with the retriever's score scaled to [0, 1] (weight 0: reader only)."""
    return (1.0 - weight) * reader_score + weight * RETRIEVER_LOGIT_SCALE * retriever_score


def answer_context(text: str, start: int, end: int) -> tuple[str, int]:
    """The sentence(s) of ``text`` around ``[start, end)`` and where they start."""
    spans = sentence_spans(text)
    first = next((s for s in spans if s[0] <= start < s[1]), (start, end))
    last = next((s for s in spans if s[0] < end <= s[1]), first)
    return text[first[0] : max(last[1], end)], first[0]


class AnswerBuilder:
    """The best answers of a reading: span and retriever evidence mixed, duplicates dropped, best first,
    each scored by the probability that it is right.

    Args:
        retriever_weight: how much the retriever's score (min-max scaled over the passages) counts.
        no_answer_threshold: spans that beat "no answer" by this many logits or less are dropped.
        answers: how many answers at most.
        calibrator: maps an answer's features to the probability that it is right (None: the score is the
            relative score).
        min_score: answers scored below this are not given (none left: the question is not answered).
    """

    def __init__(
        self,
        *,
        retriever_weight: float,
        no_answer_threshold: float,
        answers: int,
        calibrator: Calibrator | None = None,
        min_score: float = 0.0,
    ) -> None:
        self.retriever_weight = retriever_weight
        self.no_answer_threshold = no_answer_threshold
        self.answers = answers
        self.calibrator = calibrator
        self.min_score = min_score

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        answers: int | None = None,
        min_score: float | None = None,
        calibrator: Calibrator | None = None,
    ) -> AnswerBuilder:
        """The builder the settings describe; ``answers`` and ``min_score`` override those settings."""
        return cls(
            retriever_weight=settings.retriever_weight,
            no_answer_threshold=settings.no_answer_threshold,
            answers=answers or settings.answers,
            calibrator=calibrator,
            min_score=settings.min_score if min_score is None else min_score,
        )

    def run(
        self,
        result: ReaderResult,
        passages: Sequence[Passage],
        page_starts: dict[str, list[tuple[int, int]]] | None = None,
        question: str = "",
    ) -> list[Answer]:
        """Answers from what ``read_passages`` returned for ``passages``.

        Args:
            result: the reading.
            passages: the passages read, in the order read.
            page_starts: per document id, its (page, offset) starts, to give each answer its page.
            question: the question (its words are features of the calibrated score).

        Returns:
            Answers whose text equals ``document.text[char_start:char_end]``, best first by score, none
            scored below ``min_score``, at most ``answers``.
        """
        pages = page_starts or {}
        retrieval = min_max({str(i): p.score for i, p in enumerate(passages)})
        scored = self._scored(result, passages, pages, retrieval)
        null_logit = combine_scores(result.null_score, 1.0, self.retriever_weight)
        normalizer = logsumexp([item.combined for item in scored] + [null_logit])
        # How many passages give the same words: agreement is evidence an answer is right. A near-duplicate
        # folded into a passage, not read, counts when it holds the same text (read, it would have agreed).
        agreeing: dict[str, dict[int, int]] = {}
        for item in scored:
            agreeing.setdefault(item.words, {})[item.span.passage_index] = 1 + len(item.held)
        cues = question_cues(question)
        picked: list[Answer] = []
        picked_words: dict[str, int] = {}  # an answer's words -> its place in ``picked``
        sources: dict[int, list[AnswerSource]] = {}
        for item in scored:
            if any(_overlaps(a, item) for a in picked):
                continue  # the same place again, through an overlapping chunk
            if item.words in picked_words:
                # The same answer in another place: one answer, with the other places listed under it.
                first = picked_words[item.words]
                _add_places(sources.setdefault(first, []), picked[first], item, pages)
                continue
            relative = math.exp(item.combined - normalizer)
            agreement = sum(agreeing[item.words].values())
            if item.held:
                sources[len(picked)] = item.held
            picked_words[item.words] = len(picked)
            picked.append(self._answer(item, pages, relative, agreement, retrieval, cues))
        # Best first by the score shown (the probability of being right), never below min_score: an answer
        # below it leaves its place to the next candidate. Ties keep the reading's order.
        picked = [dataclasses.replace(a, also_in=tuple(sources.get(i, ()))) for i, a in enumerate(picked)]
        kept = [a for a in picked if a.score >= self.min_score]
        kept.sort(key=lambda a: a.score, reverse=True)
        return kept[: self.answers]

    def _scored(
        self,
        result: ReaderResult,
        passages: Sequence[Passage],
        pages: dict[str, list[tuple[int, int]]],
        retrieval: dict[str, float],
    ) -> list[_Scored]:
        """The spans that beat "no answer" by more than the threshold, with retriever evidence mixed in,
        best first."""
        scored = []
        for span in result.spans:
            if span.margin <= self.no_answer_threshold:
                continue
            passage = passages[span.passage_index]
            combined = combine_scores(span.score, retrieval[str(span.passage_index)], self.retriever_weight)
            text = passage.text_at(passage.char_start + span.char_start, passage.char_start + span.char_end)
            # The near-duplicates folded into the passage that hold the same text (a title answer: none).
            held = (
                copy_sources(passage, span.char_start, span.char_end, pages) if span.char_start >= 0 else []
            )
            scored.append(_Scored(combined, span, passage, text, answer_key(text), held))
        scored.sort(key=lambda item: item.combined, reverse=True)
        return scored

    def _answer(
        self,
        item: _Scored,
        pages: dict[str, list[tuple[int, int]]],
        relative: float,
        agreement: int,
        retrieval: dict[str, float],
        cues: QuestionCues,
    ) -> Answer:
        """One answer: its context and page, and its score (calibrated where a calibrator is set)."""
        span, passage = item.span, item.passage
        if span.char_start >= 0:
            context, context_start = answer_context(passage.text, span.char_start, span.char_end)
            context_start += passage.char_start
        else:  # the entry's title: the term is its own context
            context = passage.title
            context_start = passage.title_start if passage.title_start is not None else item.start
        page = page_at(pages[passage.document_id], item.start) if passage.document_id in pages else None
        candidate = Candidate(
            span_score=span.score,
            margin=span.margin,
            relative_score=relative,
            retrieval=retrieval[str(span.passage_index)],
            passage_rank=span.passage_index + 1,
            dense_score=passage.dense_score,
            dense_rank=passage.dense_rank,
            lexical_score=passage.lexical_score,
            lexical_rank=passage.lexical_rank,
            agreement=agreement,
            passage_text=prefixed(passage.heading, passage.title, passage.text).text,
            sentence=context,
            answer=item.text,
        )
        values = features(cues, candidate)
        return Answer(
            text=item.text,
            score=self.calibrator.probability(values) if self.calibrator is not None else relative,
            path=passage.path,
            document_id=passage.document_id,
            char_start=item.start,
            char_end=item.end,
            page=page,
            passage=passage,
            reader_score=span.score,
            retriever_score=passage.score,
            context=context,
            context_start=context_start,
            relative_score=relative,
            features=values,
        )


@dataclass(frozen=True)
class _Scored:
    """A span the reader found, scored with the retriever's evidence; ``words`` are its normalized text,
    ``held`` the places in near-duplicates folded into its passage that hold the same text."""

    combined: float
    span: SpanCandidate
    passage: Passage
    text: str
    words: str
    held: list[AnswerSource]

    @property
    def start(self) -> int:
        return self.passage.char_start + self.span.char_start

    @property
    def end(self) -> int:
        return self.passage.char_start + self.span.char_end


def _overlaps(answer: Answer, item: _Scored) -> bool:
    return (
        answer.document_id == item.passage.document_id
        and item.start < answer.char_end
        and answer.char_start < item.end
    )


def _add_places(
    places: list[AnswerSource], answer: Answer, item: _Scored, pages: dict[str, list[tuple[int, int]]]
) -> None:
    """List ``item``'s place, and the near-duplicates that hold it, under ``answer`` (the same words found
    first), each place once."""
    seen = {(s.document_id, s.char_start) for s in places}
    seen.add((answer.document_id, answer.char_start))
    passage = item.passage
    if (passage.document_id, item.start) not in seen and item.span.char_start >= 0:
        known = pages.get(passage.document_id)
        page = page_at(known, item.start) if known is not None else None
        places.append(AnswerSource(passage.path, passage.document_id, item.start, item.end, page))
        seen.add((passage.document_id, item.start))
    places.extend(source for source in item.held if (source.document_id, source.char_start) not in seen)


def copy_sources(
    passage: Passage, start: int, end: int, page_starts: dict[str, list[tuple[int, int]]]
) -> list[AnswerSource]:
    """Where the answer at [start, end) of ``passage``'s text stands in each near-duplicate folded into it:
    the occurrence of the same text nearest the same place (none in a copy that lacks it)."""
    text = passage.text[start:end]
    sources = []
    for copy in passage.copies:
        found = [m.start() for m in re.finditer(re.escape(text), copy.text)]
        if not found:
            continue
        at = copy.char_start + min(found, key=lambda i: abs(i - start))
        known = page_starts.get(copy.document_id)
        page = page_at(known, at) if known is not None else None
        sources.append(AnswerSource(copy.path, copy.document_id, at, at + len(text), page))
    return sources
