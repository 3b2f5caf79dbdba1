from __future__ import annotations

import numpy as np
import pytest

from spanqa.reader.decoding import (
    SpanCandidate,
    WindowLogits,
    complete_marks,
    decode,
    drop_overlapping,
    trim_span,
    window_spans,
)

NEG = -50.0


def make_window(
    n_tokens: int,
    *,
    starts: dict[int, float],
    ends: dict[int, float],
    context: range,
    passage_index: int = 0,
    base: float = NEG,
) -> WindowLogits:
    start_logits = np.full(n_tokens, base)
    end_logits = np.full(n_tokens, base)
    for i, v in starts.items():
        start_logits[i] = v
    for i, v in ends.items():
        end_logits[i] = v
    # Token i covers chars [2i, 2i+1) of the passage: one letter and a space.
    offsets = [(2 * i, 2 * i + 1) if i in context else None for i in range(n_tokens)]
    return WindowLogits(passage_index, start_logits, end_logits, offsets, null_index=0)


def test_best_span_is_start_plus_end_logits() -> None:
    w = make_window(10, starts={3: 5.0, 4: 1.0}, ends={5: 4.0, 6: 1.0}, context=range(2, 10))
    best = window_spans(w, max_answer_tokens=30)[0]
    assert (best.start_token, best.end_token) == (3, 5)
    assert best.score == pytest.approx(9.0)
    assert (best.char_start, best.char_end) == (6, 11)


def test_end_before_start_is_never_chosen() -> None:
    w = make_window(10, starts={7: 9.0, 3: 0.0}, ends={4: 9.0, 8: 0.0}, context=range(2, 10))
    for span in window_spans(w, top_n=50):
        assert span.end_token >= span.start_token
    best = window_spans(w)[0]
    assert (best.start_token, best.end_token) != (7, 4)


def test_spans_longer_than_max_answer_tokens_are_dropped() -> None:
    w = make_window(40, starts={2: 10.0, 20: 1.0}, ends={35: 10.0, 21: 1.0}, context=range(2, 40))
    spans = window_spans(w, max_answer_tokens=5, top_n=100)
    assert spans
    assert all(s.end_token - s.start_token + 1 <= 5 for s in spans)


def test_spans_stay_inside_the_passage_tokens() -> None:
    # The question tokens (1-3) and CLS (0) get the highest logits; they must not be picked.
    w = make_window(
        12, starts={0: 20.0, 1: 20.0, 5: 2.0}, ends={0: 20.0, 3: 20.0, 6: 2.0}, context=range(5, 12)
    )
    spans = window_spans(w, top_n=100)
    assert all(s.start_token >= 5 and s.end_token >= 5 for s in spans)
    assert (spans[0].start_token, spans[0].end_token) == (5, 6)


def test_null_score_and_margin() -> None:
    w = make_window(8, starts={0: 6.0, 4: 1.0}, ends={0: 6.0, 5: 1.0}, context=range(3, 8))
    span = window_spans(w)[0]
    assert w.null_score == pytest.approx(12.0)
    assert span.margin == pytest.approx(2.0 - 12.0)


def test_scores_rank_across_windows_by_raw_logits_not_per_window_softmax() -> None:
    # Window A is peaked (its softmax would be ~1.0) but has low raw logits; window B is flat and high.
    a = make_window(8, starts={4: 2.0}, ends={4: 2.0}, context=range(3, 8), passage_index=0, base=-30.0)
    b = make_window(
        8, starts={4: 6.0, 5: 5.9}, ends={4: 6.0, 5: 5.9}, context=range(3, 8), passage_index=1, base=5.0
    )
    spans = decode([a, b], ["x " * 8, "y " * 8], top_k=3)
    assert spans[0].passage_index == 1
    assert spans[0].score == pytest.approx(12.0)
    assert [s.score for s in spans] == sorted((s.score for s in spans), reverse=True)


def test_overlapping_duplicates_keep_the_best() -> None:
    cands = [
        SpanCandidate(0, 0, 10, 5.0, 0.0, 0, 2),
        SpanCandidate(0, 5, 12, 7.0, 0.0, 1, 3),
        SpanCandidate(0, 20, 25, 1.0, 0.0, 5, 6),
        SpanCandidate(1, 0, 10, 3.0, 0.0, 0, 2),
    ]
    kept = drop_overlapping(cands)
    assert [(k.passage_index, k.char_start, k.score) for k in kept] == [
        (0, 5, 7.0),
        (1, 0, 3.0),
        (0, 20, 1.0),
    ]


def test_same_span_from_two_windows_is_returned_once() -> None:
    a = make_window(8, starts={4: 3.0}, ends={5: 3.0}, context=range(3, 8))
    b = make_window(8, starts={4: 4.0}, ends={5: 4.0}, context=range(3, 8))
    spans = decode([a, b], ["a b c d e f g h "], top_k=10)
    assert len([s for s in spans if (s.char_start, s.char_end) == (8, 11)]) == 1
    assert spans[0].score == pytest.approx(8.0)


def test_trim_span_removes_edge_whitespace() -> None:
    text = "a  Denver Broncos  b"
    assert trim_span(text, 1, 19) == (3, 17)
    assert text[3:17] == "Denver Broncos"
    assert trim_span("   ", 0, 3) == (3, 3)


def test_window_without_passage_tokens_gives_nothing() -> None:
    w = make_window(5, starts={1: 3.0}, ends={1: 3.0}, context=range(0))
    assert window_spans(w) == []


def test_a_span_never_crosses_a_segment_boundary() -> None:
    # Tokens 3..6 cover chars 6..13; the best span (3, 6) would cross from one block [0, 9) into [10, 20).
    w = make_window(12, starts={3: 9.0, 5: 2.0}, ends={6: 9.0, 4: 1.0}, context=range(2, 12))
    assert (window_spans(w)[0].start_token, window_spans(w)[0].end_token) == (3, 6)
    best = window_spans(w, segments=[(0, 9), (10, 20)])
    assert best and all(
        (s.char_start < 9 and s.char_end <= 9) or (s.char_start >= 10 and s.char_end <= 20) for s in best
    )
    assert (best[0].start_token, best[0].end_token) == (5, 6)  # 2 + 9 beats 9 + 1 inside [0, 9)


def test_text_outside_every_segment_is_never_an_answer() -> None:
    # A heading in front of the passage (chars 0..9) lies in no segment: its tokens 2..4 are never taken.
    w = make_window(12, starts={2: 20.0, 7: 1.0}, ends={3: 20.0, 8: 1.0}, context=range(2, 12))
    spans = decode([w], ["x" * 30], segments=[[(10, 30)]], top_k=20)
    assert spans and all(s.char_start >= 10 for s in spans)
    assert (spans[0].start_token, spans[0].end_token) == (7, 8)
    assert decode([w], ["x" * 30], segments=[[]]) == []


def test_a_lone_dash_or_bracket_is_never_an_answer() -> None:
    # Token i covers char 2i; the passage "x - ( a ..." puts "-" under token 1 and "(" under token 2.
    passage = "x - ( a b c d e f g h i j"
    w = make_window(12, starts={1: 9.0, 2: 8.5, 3: 5.0}, ends={1: 9.0, 3: 5.0}, context=range(1, 12))
    assert (window_spans(w)[0].start_token, window_spans(w)[0].end_token) == (1, 1)  # "-" scores best
    texts = [passage[s.char_start : s.char_end] for s in decode([w], [passage], top_k=5)]
    assert "-" not in texts and texts[0] == "- ( a"  # the best span that is more than a stray mark
    # A mark that can answer a question about a manual ("Which operator concatenates strings?") stays.
    other = "x | ( a b c d e f g h i j"
    best = decode([w], [other], top_k=1)[0]
    assert other[best.char_start : best.char_end] == "|"


@pytest.mark.parametrize(
    ("text", "word", "expected"),
    [
        ("-u\n--include-untracked\n", "include-untracked", "--include-untracked"),
        ("git init [-q | --quiet]", "quiet", "--quiet"),
        ("git init [-q | --quiet]", "q ", "-q"),
        ("-b <branch-name>, --branch=<name>", "<branch-name", "<branch-name>"),
        ("--output-directory <dir>", "dir>", "<dir>"),
        ("a co-operative mode", "operative", "operative"),  # a hyphen inside a word is not an option's
        ("the ---- line", "line", "line"),
        ("x (see below)", "see below", "see below"),  # balanced: nothing to add
    ],
)
def test_complete_marks_gives_the_option_and_its_brackets_as_written(
    text: str, word: str, expected: str
) -> None:
    start = text.index(word.strip())
    start, end = complete_marks(text, start, start + len(word.strip()))
    assert text[start:end] == expected


def test_complete_marks_stays_inside_the_segment() -> None:
    text = "--all\n<dir"
    assert complete_marks(text, 2, 5, [(2, 5)]) == (2, 5)  # the dashes lie outside the segment
    assert complete_marks(text, 2, 5, [(0, 5)]) == (0, 5)
    assert complete_marks(text, 6, 10, [(6, 10)]) == (6, 10)


def test_decode_gives_an_option_with_its_dashes() -> None:
    # Token i covers char 2i: the best span is token 2 alone, "q" of "--quiet"; decoded, it keeps the dashes.
    passage = "x --quiet y"
    w = make_window(6, starts={2: 9.0}, ends={2: 9.0}, context=range(1, 6))
    best = decode([w], [passage], top_k=1)[0]
    assert passage[best.char_start : best.char_end] == "--q"
