"""Span decoding from start/end logits: the part transformers 5 no longer does for us.

Scores are raw logit sums (start + end), never a softmax per window, so a span from one window or passage
can be ranked against a span from any other; the null score is the CLS position's start + end logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: One character that is never an answer alone: a dash cut from an option ("-" of "-a"), a bracket, a quote,
#: a separator. Marks that can be answers in a manual ("|", "%", "#", "~", "*") are not among them.
STRAY_MARKS = frozenset("-\u2010\u2013\u2014()[]{}<>,.;:'\"`")


@dataclass(frozen=True)
class WindowLogits:
    """One model window over (question, passage) and what the model said about it.

    Attributes:
        passage_index: which passage this window reads.
        start_logits: one logit per token.
        end_logits: one logit per token.
        offsets: per token, (char_start, char_end) into the passage, or None outside the passage.
        null_index: the token whose logits mean "no answer" (CLS).
    """

    passage_index: int
    start_logits: np.ndarray
    end_logits: np.ndarray
    offsets: Sequence[tuple[int, int] | None]
    null_index: int = 0

    @property
    def null_score(self) -> float:
        return float(self.start_logits[self.null_index] + self.end_logits[self.null_index])


@dataclass(frozen=True)
class SpanCandidate:
    """A span of one passage: ``passage_text[char_start:char_end]``."""

    passage_index: int
    char_start: int
    char_end: int
    score: float
    null_score: float
    start_token: int
    end_token: int

    @property
    def margin(self) -> float:
        """How much better than "no answer" the model found this span (in logits)."""
        return self.score - self.null_score


Segments = Sequence[tuple[int, int]]
"""[start, end) char ranges of a passage that an answer must lie inside (one of them, whole)."""


def _segment_of_tokens(offsets: Sequence[tuple[int, int]], segments: Segments) -> np.ndarray:
    """Per token, the index of the segment that holds it whole, or -1."""
    bounds = sorted(segments)
    if not bounds:
        return np.full(len(offsets), -1, dtype=np.int64)
    starts = np.array([s for s, _ in bounds], dtype=np.int64)
    ends = np.array([e for _, e in bounds], dtype=np.int64)
    token_starts = np.array([o[0] for o in offsets], dtype=np.int64)
    token_ends = np.array([o[1] for o in offsets], dtype=np.int64)
    index = np.searchsorted(starts, token_starts, side="right") - 1
    inside = (index >= 0) & (token_ends <= ends[np.maximum(index, 0)])
    return np.where(inside, index, -1)


def window_spans(
    window: WindowLogits,
    *,
    max_answer_tokens: int = 30,
    top_n: int = 20,
    segments: Segments | None = None,
) -> list[SpanCandidate]:
    """The ``top_n`` best spans of one window.

    A span starts and ends on passage tokens, has ``end >= start`` and at most ``max_answer_tokens`` tokens;
    with ``segments``, both its ends lie in the same segment (a span never crosses a block boundary, and
    text outside every segment, such as a heading put in front of the passage, is never an answer).

    Args:
        window: the window's logits and offsets.
        max_answer_tokens: the longest span, in tokens.
        top_n: how many spans to return.
        segments: the char ranges of the passage an answer may come from (None: all of it).

    Returns:
        Spans, best first.
    """
    context = np.array([o is not None and o[1] > o[0] for o in window.offsets], dtype=bool)
    positions = np.flatnonzero(context)
    if positions.size == 0 or top_n <= 0:
        return []
    starts = np.asarray(window.start_logits, dtype=np.float64)[positions]
    ends = np.asarray(window.end_logits, dtype=np.float64)[positions]
    scores = starts[:, None] + ends[None, :]
    gap = positions[None, :] - positions[:, None]
    valid = (gap >= 0) & (gap < max_answer_tokens)
    if segments is not None:
        spans = [window.offsets[int(p)] or (0, 0) for p in positions]
        owner = _segment_of_tokens(spans, segments)
        valid &= (owner[:, None] == owner[None, :]) & (owner[:, None] >= 0)
    scores = np.where(valid, scores, -np.inf)
    flat = scores.ravel()
    n_valid = int(valid.sum())
    k = min(top_n, n_valid)
    if k == 0:
        return []
    best = np.argpartition(-flat, k - 1)[:k]
    best = best[np.argsort(-flat[best], kind="stable")]
    null = window.null_score
    out: list[SpanCandidate] = []
    for flat_index in best:
        i, j = divmod(int(flat_index), positions.size)
        start_tok, end_tok = int(positions[i]), int(positions[j])
        start_offset = window.offsets[start_tok]
        end_offset = window.offsets[end_tok]
        assert start_offset is not None and end_offset is not None
        out.append(
            SpanCandidate(
                passage_index=window.passage_index,
                char_start=start_offset[0],
                char_end=end_offset[1],
                score=float(flat[flat_index]),
                null_score=null,
                start_token=start_tok,
                end_token=end_tok,
            )
        )
    return out


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` so it neither starts nor ends with whitespace (byte-BPE offsets can)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# Brackets a span may leave open or closed by ending or starting one character short.
_PAIRS = {"<": ">", "[": "]", "(": ")", "{": "}"}
_CLOSERS = {close: open_ for open_, close in _PAIRS.items()}
# What may stand before an option's dashes: the option starts there ("[-q | --quiet]", "-b, --branch").
_OPTION_LEFT = frozenset(" \t\n[(|,=")


def complete_marks(text: str, start: int, end: int, segments: Segments | None = None) -> tuple[int, int]:
    """Widen ``[start, end)`` over the marks that belong to it: an option's leading dashes ("--prune", not
    "prune", when the dashes open the word) and a bracket it leaves open or closed ("<dir>", not "<dir").

    WordPiece splits "--include-untracked" into "-", "-", "include", ... and the reader often starts on the
    word; the user wants the option as written. The span never grows out of the segment that holds it.
    """
    low, high = 0, len(text)
    if segments is not None:
        holder = next(((a, b) for a, b in segments if a <= start and end <= b), None)
        if holder is not None:
            low, high = holder
    if start < end and text[start].isalnum():
        dashes = start
        while dashes > low and start - dashes < 2 and text[dashes - 1] == "-":
            dashes -= 1
        if dashes < start and (dashes == low or text[dashes - 1] in _OPTION_LEFT):
            start = dashes
    span = text[start:end]
    for opener, closer in _PAIRS.items():
        if span.count(opener) > span.count(closer) and end < high and text[end] == closer:
            end += 1
            span = text[start:end]
    for closer, opener in _CLOSERS.items():
        if span.count(closer) > span.count(opener) and start > low and text[start - 1] == opener:
            start -= 1
            span = text[start:end]
    return start, end


def drop_overlapping(candidates: Sequence[SpanCandidate]) -> list[SpanCandidate]:
    """Keep the best of every group of spans that overlap in the same passage; best first."""
    kept: list[SpanCandidate] = []
    for cand in sorted(candidates, key=lambda c: c.score, reverse=True):
        if any(
            k.passage_index == cand.passage_index
            and cand.char_start < k.char_end
            and k.char_start < cand.char_end
            for k in kept
        ):
            continue
        kept.append(cand)
    return kept


def decode(
    windows: Sequence[WindowLogits],
    passages: Sequence[str],
    *,
    max_answer_tokens: int = 30,
    top_n_per_window: int = 20,
    top_k: int = 5,
    segments: Sequence[Segments | None] | None = None,
) -> list[SpanCandidate]:
    """Best spans over all windows of all passages, overlapping duplicates dropped, best first.

    Args:
        windows: every window of every passage.
        passages: the passage texts (for trimming whitespace at span edges).
        max_answer_tokens: the longest span in tokens.
        top_n_per_window: candidates taken from each window before ranking.
        top_k: how many spans to return.
        segments: per passage, the char ranges an answer must lie inside (None: anywhere in it).

    Returns:
        Up to ``top_k`` spans, none empty or a lone mark of ``STRAY_MARKS``.
    """
    candidates: list[SpanCandidate] = []
    for window in windows:
        allowed = segments[window.passage_index] if segments is not None else None
        for cand in window_spans(
            window, max_answer_tokens=max_answer_tokens, top_n=top_n_per_window, segments=allowed
        ):
            text = passages[cand.passage_index]
            start, end = complete_marks(text, *trim_span(text, cand.char_start, cand.char_end), allowed)
            if end <= start or text[start:end] in STRAY_MARKS:
                continue  # nothing, or a mark cut from a word ("-" of "-a", a bracket, a quote)
            if (start, end) != (cand.char_start, cand.char_end):
                cand = SpanCandidate(
                    cand.passage_index,
                    start,
                    end,
                    cand.score,
                    cand.null_score,
                    cand.start_token,
                    cand.end_token,
                )
            candidates.append(cand)
    return drop_overlapping(candidates)[:top_k]
