"""The reader's post-processing on hand-made readings: score mixing, duplicates, titles, offsets, context."""

from __future__ import annotations

import math

import pytest

from spanqa.reader.answers import (
    RETRIEVER_LOGIT_SCALE,
    AnswerBuilder,
    answer_context,
    combine_scores,
    reader_input,
)
from spanqa.reader.decoding import SpanCandidate
from spanqa.reader.reader import ReaderResult
from spanqa.types import Passage, PassageCopy

DOCUMENT = "work_mem (integer)\nSets the base maximum amount of memory. The default is four megabytes (4MB)."


def passage(
    text: str, start: int, *, score: float = 0.5, document_id: str = "d1", **extra: object
) -> Passage:
    return Passage(
        chunk_id=f"c{start}",
        document_id=document_id,
        path=f"{document_id}.html",
        text=text,
        char_start=start,
        char_end=start + len(text),
        score=score,
        **extra,  # type: ignore[arg-type]
    )


def span(index: int, start: int, end: int, score: float, null: float = 0.0) -> SpanCandidate:
    return SpanCandidate(index, start, end, score, null, 0, 0)


def test_retriever_weight_moves_scores_toward_the_retriever() -> None:
    assert combine_scores(10.0, 0.5, 0.0) == 10.0
    assert combine_scores(10.0, 0.5, 1.0) == RETRIEVER_LOGIT_SCALE * 0.5
    assert combine_scores(10.0, 0.9, 0.5) > combine_scores(10.0, 0.1, 0.5)


def test_answer_context_is_the_sentence_around_the_answer() -> None:
    text = "First sentence. The Denver Broncos won. Last one."
    start = text.index("Denver")
    context, offset = answer_context(text, start, start + len("Denver Broncos"))
    assert context == "The Denver Broncos won." and text[offset : offset + len(context)] == context


def test_answers_are_best_first_without_repeats_and_sum_below_one() -> None:
    body_start = DOCUMENT.index("Sets")
    body = DOCUMENT[body_start:]
    a, b = passage(body, body_start, score=0.9), passage(body, body_start, score=0.1, document_id="d2")
    four = body.index("four megabytes")
    mb = body.index("4MB")
    result = ReaderResult(
        spans=[
            span(0, four, four + len("four megabytes"), 8.0),
            span(0, four, four + len("four"), 7.0),  # overlaps the first: dropped
            span(1, four, four + len("four megabytes"), 6.0),  # the same words in another document: merged
            span(1, mb, mb + 3, 5.0),
            span(0, 0, 4, -1.0, null=0.0),  # does not beat "no answer": dropped
        ],
        null_score=1.0,
    )
    answers = AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=5).run(result, [a, b])
    assert [x.text for x in answers] == ["four megabytes", "4MB"]
    # The same words in the other document are one answer, with that place listed under it.
    (other,) = answers[0].also_in
    assert (other.document_id, other.path) == ("d2", "d2.html")
    assert DOCUMENT[other.char_start : other.char_end] == "four megabytes"
    assert answers[1].also_in == ()
    assert answers[0].score > answers[1].score and sum(x.score for x in answers) < 1.0
    for x in answers:
        assert DOCUMENT[x.char_start : x.char_end] == x.text
        assert x.context_start <= x.char_start and x.text in x.context
    assert (
        len(AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=1).run(result, [a, b])) == 1
    )
    assert AnswerBuilder(retriever_weight=0.5, no_answer_threshold=100.0, answers=5).run(result, [a, b]) == []


def test_answers_of_punctuation_alone_stay_apart() -> None:
    # "-a" and "-A" are different options; normalized as SQuAD answers both are "", one folded into the other.
    text = "Use -a for all files, or -A for almost all."
    lower, upper = text.index("-a"), text.index("-A")
    result = ReaderResult(
        spans=[span(0, lower, lower + 2, 8.0), span(0, upper, upper + 2, 7.0)], null_score=0.0
    )
    answers = AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=5).run(
        result, [passage(text, 0)]
    )
    assert [a.text for a in answers] == ["-a", "-A"] and all(a.also_in == () for a in answers)


def test_an_answer_lists_the_places_of_the_near_duplicates_folded_into_its_passage() -> None:
    body_start = DOCUMENT.index("Sets")
    body = DOCUMENT[body_start:]
    # The same paragraph in another manual, one word changed and shifted by a heading; and one that has
    # lost the answer's words: it is not listed.
    other = "Defaults\nSets the base maximum amount of memory. The default is four megabytes (4MB)."
    copies = (
        PassageCopy("k2", "d2", "d2.html", 100, 100 + len(other), other, page=3),
        PassageCopy("k3", "d3", "d3.html", 0, 40, "Sets the base maximum amount of memory."),
    )
    p = passage(body, body_start, copies=copies)
    four = body.index("four megabytes")
    result = ReaderResult(spans=[span(0, four, four + len("four megabytes"), 8.0)], null_score=0.0)
    (answer,) = AnswerBuilder(retriever_weight=0.5, no_answer_threshold=0.0, answers=3).run(
        result, [p], {"d2": [(1, 0), (3, 90)]}
    )
    (source,) = answer.also_in
    assert (source.document_id, source.path, source.page) == ("d2", "d2.html", 3)
    assert other[source.char_start - 100 : source.char_end - 100] == "four megabytes"
    # The copy that holds the answer agrees with it, as it would have if it had been read.
    assert answer.features["agreement"] == pytest.approx(math.log1p(2))


def test_an_answer_from_the_entry_title_points_before_the_passage() -> None:
    body_start = DOCUMENT.index("The default")
    title = "work_mem (integer)"
    p = passage(DOCUMENT[body_start:], body_start, heading="Memory", title=title, title_start=0)
    read = reader_input(p)
    assert read.text == f"Memory\n{title}\n{DOCUMENT[body_start:]}"
    title_at = read.text.index(title)
    assert read.segments[0] == (title_at, title_at + len(title))  # the heading path is never answerable
    # A span of the title, as read_passages maps it: relative to the passage start, so negative.
    result = ReaderResult(spans=[span(0, -body_start, -body_start + len("work_mem"), 9.0)], null_score=0.0)
    (answer,) = AnswerBuilder(retriever_weight=0.0, no_answer_threshold=0.0, answers=3).run(result, [p])
    assert (answer.char_start, answer.text) == (0, "work_mem")
    assert answer.context == title and answer.context_start == 0


@pytest.mark.parametrize("heading", ["", "Resource Consumption > Memory"])
def test_reader_input_maps_every_answerable_offset_into_the_document(heading: str) -> None:
    body_start = DOCUMENT.index("Sets")
    body = DOCUMENT[body_start:]
    cut = body.index(" The")
    p = passage(body, body_start, heading=heading, segments=((0, cut), (cut + 1, len(body))))
    read = reader_input(p)
    for start, end in read.segments:
        document_start = read.document_offset(start)
        assert DOCUMENT[document_start : read.document_offset(end)] == read.text[start:end]
        # And back: the document text of a segment stands where the reader reads it.
        assert read.answer_offset(document_start, read.document_offset(end)) == start
    # Across a block boundary, or outside the passage, is not an answer the reader could give.
    assert read.answer_offset(body_start + cut - 2, body_start + cut + 3) is None
    assert read.answer_offset(0, 3) is None
    if heading:
        with pytest.raises(ValueError):
            read.document_offset(0)
