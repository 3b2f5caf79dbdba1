"""Reader-only SQuAD evaluation: the gold paragraph is given, the reader finds the span."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from spanqa.reader.reader import ExtractiveReader
from spanqa.reader.squad import SquadExample, evaluate_predictions, score_prediction


def evaluate_reader(
    reader: ExtractiveReader,
    examples: Sequence[SquadExample],
    *,
    no_answer_threshold: float | None = None,
    thresholds: Sequence[float | None] = (),
    questions_per_batch: int = 32,
    on_progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """EM/F1 of ``reader`` on ``examples`` with the gold paragraph as the only passage.

    Args:
        reader: the reader to evaluate.
        examples: SQuAD examples.
        no_answer_threshold: abstain when the best span beats "no answer" by no more than this (logits);
            None never abstains (SQuAD v1.1 style). When the data holds unanswerable questions, the best
            threshold found on the data is reported too.
        thresholds: more thresholds to score from the same pass (None: never abstain), reported as
            ``threshold_table``; this is how to choose ``no_answer_threshold``.
        questions_per_batch: questions whose windows share forward passes.
        on_progress: called with the number of questions just finished.

    Returns:
        The official metrics plus ``windows``, ``seconds``, ``windows_per_s`` and, for v2.0 data,
        ``best_threshold`` with ``best_f1`` / ``best_exact``; ``threshold_table`` when asked for.
    """
    predictions: dict[str, str] = {}
    margins: dict[str, float] = {}
    best_texts: dict[str, str] = {}
    windows = 0
    started = time.perf_counter()
    for offset in range(0, len(examples), questions_per_batch):
        batch = examples[offset : offset + questions_per_batch]
        results = reader.run_batch([(ex.question, [ex.context]) for ex in batch])
        for ex, result in zip(batch, results, strict=True):
            windows += result.windows
            best = result.spans[0] if result.spans else None
            text = ex.context[best.char_start : best.char_end] if best else ""
            best_texts[ex.id] = text
            margins[ex.id] = best.score - result.null_score if best else float("-inf")
            predictions[ex.id] = _predict(text, margins[ex.id], no_answer_threshold)
        if on_progress is not None:
            on_progress(len(batch))
    seconds = time.perf_counter() - started
    metrics: dict[str, Any] = dict(evaluate_predictions(examples, predictions))
    metrics.update(
        {
            "windows": windows,
            "seconds": round(seconds, 2),
            "windows_per_s": round(windows / max(seconds, 1e-9), 2),
        }
    )
    if any(ex.is_impossible for ex in examples):
        metrics.update(_best_threshold(examples, best_texts, margins))
    if thresholds:
        metrics["threshold_table"] = threshold_table(examples, best_texts, margins, thresholds)
    return metrics


def _predict(text: str, margin: float, threshold: float | None) -> str:
    """The reader's answer, or "" where it abstains (no span, or a margin at or below the threshold)."""
    abstain = threshold is not None and margin <= threshold
    return "" if abstain else text


def threshold_table(
    examples: Sequence[SquadExample],
    best_texts: dict[str, str],
    margins: dict[str, float],
    thresholds: Sequence[float | None],
) -> list[dict[str, float | None]]:
    """Official metrics at each abstention threshold, from one pass of the reader.

    Args:
        examples: the questions with their gold answers.
        best_texts: question id -> the reader's best span text ("" when it found none).
        margins: question id -> best span score minus the no-answer score (-inf when no span).
        thresholds: abstention thresholds in logits; None never abstains.

    Returns:
        One row per threshold: ``threshold``, ``exact_match``, ``f1``, ``answered`` (% of questions given a
        span) and, for data with both kinds of question, ``HasAns_f1`` and ``NoAns_exact``.
    """
    rows: list[dict[str, float | None]] = []
    for threshold in thresholds:
        predictions = {ex.id: _predict(best_texts[ex.id], margins[ex.id], threshold) for ex in examples}
        metrics = evaluate_predictions(examples, predictions)
        answered = sum(1 for ex in examples if predictions[ex.id])
        row: dict[str, float | None] = {
            "threshold": threshold,
            "exact_match": metrics["exact_match"],
            "f1": metrics["f1"],
            "answered": 100.0 * answered / max(len(examples), 1),
        }
        row.update({key: metrics[key] for key in ("HasAns_f1", "NoAns_exact") if key in metrics})
        rows.append(row)
    return rows


def _best_threshold(
    examples: Sequence[SquadExample], best_texts: dict[str, str], margins: dict[str, float]
) -> dict[str, float]:
    """Sweep the abstention threshold over the observed margins (as the official v2.0 script does)."""
    rows = []
    for ex in examples:
        em, f1 = score_prediction(best_texts[ex.id], [a.text for a in ex.answers])
        rows.append((margins[ex.id], ex.is_impossible, em, f1))
    rows.sort(key=lambda r: r[0])
    total = len(rows)
    # Threshold below every margin: answer everything.
    em_sum = sum(0.0 if imp else em for _, imp, em, _ in rows)
    f1_sum = sum(0.0 if imp else f1 for _, imp, _, f1 in rows)
    best = (f1_sum, em_sum, rows[0][0] - 1.0 if rows else 0.0)
    for margin, impossible, em, f1 in rows:
        # Raising the threshold to this margin makes this question abstain.
        if impossible:
            em_sum += 1.0
            f1_sum += 1.0
        else:
            em_sum -= em
            f1_sum -= f1
        if f1_sum > best[0]:
            best = (f1_sum, em_sum, margin)
    return {
        "best_threshold": round(best[2], 4),
        "best_f1": 100.0 * best[0] / total,
        "best_exact": 100.0 * best[1] / total,
    }
