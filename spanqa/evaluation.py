"""The open-domain SQuAD evaluation: every article becomes a document, every question goes through ask.

Reports retrieval recall@k, reader-only EM/F1 (gold paragraph given), end-to-end EM/F1, the abstention rate,
latency per stage and ingest speed; per-question results go to a JSON-lines file for error analysis.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanqa import pipeline
from spanqa.errors import SpanqaError, first_line
from spanqa.reader.calibration import WEIGHTS_KEY, expected_calibration_error
from spanqa.reader.squad import (
    SquadExample,
    evaluate_predictions,
    load_squad,
    normalize_answer,
    score_prediction,
)
from spanqa.records import timings_ms
from spanqa.runtime import Runtime
from spanqa.types import AskOptions, SearchOptions

RECALL_AT = (1, 5, 10, 20)


class EvaluationError(SpanqaError):
    """An evaluation's input or output cannot be used."""


@dataclass
class EvalReport:
    metrics: dict[str, Any]
    per_question: list[dict[str, Any]] = field(default_factory=list)


def article_file_name(index: int, title: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_")[:60] or "article"
    return f"{index:03d}_{slug}.txt"


def article_texts(
    examples: Sequence[SquadExample], *, left_out: Collection[tuple[int, int]] = ()
) -> dict[int, tuple[str, str]]:
    """Per article index: its title and its text (the title, then its paragraphs, blank-line separated),
    without the (article, paragraph) pairs in ``left_out``."""
    articles: dict[int, tuple[str, dict[int, str]]] = {}
    for ex in examples:
        paragraphs = articles.setdefault(ex.article_index, (ex.title, {}))[1]
        if (ex.article_index, ex.paragraph_index) not in left_out and ex.context not in paragraphs.values():
            paragraphs.setdefault(ex.paragraph_index, ex.context)
    return {
        index: (
            title,
            title.replace("_", " ") + "\n\n" + "\n\n".join(p for _, p in sorted(paragraphs.items())),
        )
        for index, (title, paragraphs) in sorted(articles.items())
    }


def write_articles(
    examples: Sequence[SquadExample],
    directory: Path,
    *,
    left_out: Collection[tuple[int, int]] = (),
    articles_left_out: Collection[int] = (),
) -> int:
    """Write each article as one text document: its title, then its paragraphs, blank-line separated.

    Args:
        examples: the questions, which carry the articles' paragraphs.
        directory: where the files go.
        left_out: (article, paragraph) pairs not written.
        articles_left_out: articles not written at all.

    Returns:
        How many files were written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for index, (title, text) in article_texts(examples, left_out=left_out).items():
        if index in articles_left_out:
            continue
        (directory / article_file_name(index, title)).write_text(text, encoding="utf-8")
        written += 1
    return written


#: The kinds of question in an evaluation with unanswerable questions.
ANSWERABLE, UNSEEN_ARTICLE, CUT_PARAGRAPH = "answerable", "unseen_article", "cut_paragraph"
#: One article in this many (those whose SHA-1 of the title sorts first) is left out of the index: its
#: questions are about documents that were never ingested.
UNSEEN_ARTICLE_EVERY = 6
#: One paragraph in this many of the other articles (by SHA-1 of its text) is cut out of its article: its
#: questions are about a topic that is there, but a fact that is not.
CUT_PARAGRAPH_EVERY = 8


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _sha1_bucket(text: str, every: int) -> bool:
    return int(_sha1(text), 16) % every == 0


@dataclass
class UnanswerableSplit:
    """Which articles and paragraphs an evaluation leaves out, and what kind each question is."""

    articles_left_out: set[int]
    paragraphs_left_out: set[tuple[int, int]]
    kinds: dict[str, str]
    dropped: int


def unanswerable_split(examples: Sequence[SquadExample]) -> UnanswerableSplit:
    """Leave some articles and paragraphs out so that their questions have no answer in the documents.

    A question about a cut paragraph is kept as unanswerable only when none of its gold answers is still
    in what is left of its article (else it is dropped: the documents may still say it); a SQuAD 2.0 file's
    own unanswerable questions are dropped too.
    """
    articles = {ex.article_index: ex.title for ex in examples}
    by_hash = sorted(articles, key=lambda index: _sha1(articles[index]))
    unseen = set(by_hash[: max(1, len(by_hash) // UNSEEN_ARTICLE_EVERY)] if len(by_hash) > 1 else [])
    cut = {
        (ex.article_index, ex.paragraph_index)
        for ex in examples
        if ex.article_index not in unseen and _sha1_bucket(ex.context, CUT_PARAGRAPH_EVERY)
    }
    remaining = article_texts(examples, left_out=cut)
    kinds: dict[str, str] = {}
    dropped = 0
    for ex in examples:
        if ex.is_impossible:
            # SQuAD 2.0's own unanswerable questions have a paragraph that sits next to them: neither kind.
            dropped += 1
            continue
        if ex.article_index in unseen:
            kinds[ex.id] = UNSEEN_ARTICLE
        elif (ex.article_index, ex.paragraph_index) in cut:
            if contains_answer(remaining[ex.article_index][1], [a.text for a in ex.answers]):
                dropped += 1
                continue
            kinds[ex.id] = CUT_PARAGRAPH
        else:
            kinds[ex.id] = ANSWERABLE
    return UnanswerableSplit(unseen, cut, kinds, dropped)


def contains_answer(text: str, golds: Sequence[str]) -> bool:
    """True when a gold answer appears in ``text`` after SQuAD normalization (on word boundaries)."""
    haystack = f" {normalize_answer(text)} "
    return any(normalize_answer(g) and f" {normalize_answer(g)} " in haystack for g in golds)


def recall_at(hits: Sequence[bool], ks: Sequence[int] = RECALL_AT) -> dict[int, bool]:
    """For each k: does one of the first k retrieved passages contain an answer?"""
    return {k: any(hits[:k]) for k in ks}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p95_ms": 0.0}
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p95_ms": round(percentile(values, 95) * 1000, 2),
    }


def sample_questions(examples: Sequence[SquadExample], count: int) -> list[SquadExample]:
    """The ``count`` questions whose SHA-1 of the question id sorts first, in file order.

    A sample spread over every article that any tool can reproduce from the ids alone (the Haystack
    benchmark picks the same questions without importing spanqa), unlike the first N, which all come
    from the first article or two.

    Args:
        examples: questions in file order.
        count: how many to keep.

    Returns:
        The kept questions, in their original order.
    """
    ranked = sorted(range(len(examples)), key=lambda i: hashlib.sha1(examples[i].id.encode()).hexdigest())
    keep = set(ranked[:count])
    return [example for index, example in enumerate(examples) if index in keep]


def _selection(limit: int | None, sample: int | None) -> str:
    parts = ([f"first {limit}"] if limit else []) + ([f"sample {sample} by sha1(id)"] if sample else [])
    return ", then ".join(parts) or "all"


def evaluate_squad(
    runtime: Runtime,
    data_file: str | Path,
    *,
    limit: int | None = None,
    sample: int | None = None,
    passages: int | None = None,
    unanswerable: bool = False,
    on_stage: Callable[[str, int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Run the whole pipeline on a SQuAD-format file in the open setting.

    Args:
        runtime: components on a fresh, empty data directory (the articles are ingested into it).
        data_file: SQuAD v1.1 or v2.0 JSON.
        limit: ask only the first N questions (every article is still ingested).
        sample: ask N questions spread over all articles (see ``sample_questions``); after ``limit``.
        passages: passages the reader reads per question (default: the ``passages`` setting).
        unanswerable: leave some articles out of the index and cut some paragraphs out of the others (see
            ``unanswerable_split``), and report how often spanqa abstains on their questions, how its scores
            are calibrated, and coverage against accuracy over score thresholds.
        on_stage: called with (stage name, number of items) when a stage starts.
        on_progress: called with the number of questions just finished.

    Returns:
        The metrics and one record per question.
    """
    examples = load_squad(data_file)
    split = unanswerable_split(examples) if unanswerable else None
    questions = examples[:limit] if limit else examples
    if split is not None:
        questions = [ex for ex in questions if ex.id in split.kinds]
    if sample:
        questions = sample_questions(questions, sample)
    kinds = split.kinds if split is not None else {}
    n_passages = passages or runtime.settings.passages
    min_score = runtime.settings.min_score
    corpus = runtime.settings.data_dir / "corpus"
    n_articles = write_articles(
        examples,
        corpus,
        left_out=split.paragraphs_left_out if split else (),
        articles_left_out=split.articles_left_out if split else (),
    )
    if on_stage:
        on_stage("ingest", n_articles)
    job = runtime.ingest_job()
    started = time.perf_counter()
    report = job.run([corpus])
    ingest_seconds = time.perf_counter() - started
    chunks = runtime.catalog.counts()["chunks"]

    depth = max(max(RECALL_AT), n_passages)
    if questions:  # load the models and fill caches before anything is timed
        runtime.reader.warm_up()
        pipeline.ask(runtime, questions[0].question, AskOptions(passages=n_passages, answers=1))
    if on_stage:
        on_stage("ask", len(questions))
    records: list[dict[str, Any]] = []
    end_to_end: dict[str, str] = {}
    reader_only: dict[str, str] = {}
    stage_times: dict[str, list[float]] = {"encode": [], "search": [], "read": [], "total": []}
    recall_counts = dict.fromkeys(RECALL_AT, 0)
    for ex in questions:
        golds = [a.text for a in ex.answers]
        t0 = time.perf_counter()
        found = pipeline.search(runtime, ex.question, SearchOptions(top_k=depth))
        # The best candidate whatever its score, so that every threshold can be scored from one run.
        result = pipeline.ask(
            runtime, ex.question, AskOptions(passages=n_passages, answers=1, min_score=0.0), found=found
        )
        total = time.perf_counter() - t0
        hits = [contains_answer(p.text, golds) for p in found.passages] if golds else []
        recalls = recall_at(hits)
        for k, ok in recalls.items():
            recall_counts[k] += int(ok)
        kind = kinds.get(ex.id, ANSWERABLE)
        top = result.answers[0] if result.answers else None
        answered = top is not None and top.score >= min_score
        prediction = top.text if top is not None and answered else ""
        end_to_end[ex.id] = prediction
        if kind == ANSWERABLE:
            gold_read = runtime.reader.run(ex.question, [ex.context])
            best = gold_read.spans[0] if gold_read.spans else None
            reader_only[ex.id] = ex.context[best.char_start : best.char_end] if best else ""
        for key in ("encode", "search", "read"):
            stage_times[key].append(result.timings[key])
        stage_times["total"].append(total)
        records.append(
            {
                "id": ex.id,
                "question": ex.question,
                "gold": golds,
                "kind": kind,
                "article": ex.title,
                "prediction": prediction,
                "candidate": top.text if top else None,
                "right": top is not None
                and kind == ANSWERABLE
                and score_prediction(top.text, golds)[0] == 1.0,
                "abstained": not answered,
                "score": top.score if top else None,
                "relative_score": top.relative_score if top else None,
                "features": top.features if top else None,
                "reader_only_prediction": reader_only.get(ex.id),
                "first_hit_rank": next((i + 1 for i, h in enumerate(hits) if h), None),
                "answer_path": result.answers[0].path if result.answers else None,
                "timings_ms": timings_ms(result.timings),
            }
        )
        if on_progress:
            on_progress(1)
    answerable = [
        ex for ex in questions if not ex.is_impossible and kinds.get(ex.id, ANSWERABLE) == ANSWERABLE
    ]
    n = max(len(answerable), 1)
    # Scored on what the documents answer: without --unanswerable, every question of the file (a v2.0
    # file's own unanswerable ones included, as before); with it, the answerable kind.
    scored = answerable if split is not None else list(questions)
    e2e = evaluate_predictions(scored, end_to_end)
    # The best candidate whatever its score: what a run that never abstains (min_score 0) would answer.
    candidates = {r["id"]: r["candidate"] or "" for r in records}
    e2e_all = evaluate_predictions(scored, candidates)
    reader_metrics = evaluate_predictions(scored, reader_only)
    metrics: dict[str, Any] = {
        "data": str(data_file),
        "questions": len(questions),
        "selection": _selection(limit, sample),
        "articles": n_articles,
        "chunks": chunks,
        "passages_read": n_passages,
        "retriever_model": runtime.settings.retriever_model,
        "reader_model": runtime.settings.reader_model,
        WEIGHTS_KEY: runtime.reader_weights,
        "reader_precision": runtime.reader.loaded_precision,
        "recall": {f"@{k}": round(100.0 * recall_counts[k] / n, 2) for k in RECALL_AT},
        "reader_only": {
            "exact_match": round(reader_metrics["exact_match"], 2),
            "f1": round(reader_metrics["f1"], 2),
        },
        "end_to_end": _rounded(e2e),
        "end_to_end_never_abstain": _rounded(e2e_all),
        "abstention_rate": round(100.0 * sum(r["abstained"] for r in records) / max(len(records), 1), 2),
        "latency": {k: percentiles(v) for k, v in stage_times.items()},
        "ingest": {
            "files": len(report.outcomes),
            "failed": report.count("failed"),
            "seconds": round(ingest_seconds, 2),
            "chunks_per_s": round(chunks / ingest_seconds, 2) if ingest_seconds > 0 else 0.0,
        },
    }
    if split is not None:
        metrics["unanswerable"] = abstention_report(records, min_score)
        metrics["unanswerable"]["dropped_questions"] = split.dropped
        metrics["unanswerable"]["articles_left_out"] = len(split.articles_left_out)
        metrics["unanswerable"]["paragraphs_left_out"] = len(split.paragraphs_left_out)
    return EvalReport(metrics, records)


def _rounded(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics with their floats to two decimals (counts kept)."""
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in metrics.items()}


#: Score thresholds of the coverage/accuracy curve.
CURVE_THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(20))


def abstention_report(records: Sequence[dict[str, Any]], min_score: float) -> dict[str, Any]:
    """How answers and abstentions split by kind of question, at ``min_score`` and over thresholds.

    Args:
        records: per question, its ``kind``, its top answer's ``score`` (None: no answer) and ``right``.
        min_score: the threshold the run used.

    Returns:
        Per kind the questions and the abstention rate at ``min_score``; on answerable questions the share
        answered right; the ECE of the top answers' scores; and per threshold, the right answers kept (as a
        share of a run that never abstains) and the abstention rate on each unanswerable kind, on all of
        them together and on the answerable questions.
    """
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_kind.setdefault(record["kind"], []).append(record)

    answerable = by_kind.get(ANSWERABLE, [])
    unanswerable = [r for r in records if r["kind"] != ANSWERABLE]

    def answered(record: dict[str, Any], threshold: float) -> bool:
        return record["score"] is not None and record["score"] >= threshold

    def right_answered(threshold: float) -> int:
        return sum(1 for r in answerable if r["right"] and answered(r, threshold))

    def abstained(group: Sequence[dict[str, Any]], threshold: float) -> float:
        return round(100.0 * sum(not answered(r, threshold) for r in group) / max(len(group), 1), 2)

    right_any = sum(1 for r in answerable if r["right"])
    curve = []
    for threshold in CURVE_THRESHOLDS:
        row: dict[str, Any] = {
            "threshold": threshold,
            "right_kept": round(100.0 * right_answered(threshold) / max(right_any, 1), 2),
        }
        for kind in (UNSEEN_ARTICLE, CUT_PARAGRAPH):
            row[f"abstain_{kind}"] = abstained(by_kind.get(kind, []), threshold)
        # Every kind without an answer together (eval docs has one: "unanswerable"), and the cost side.
        row["abstain_unanswerable"] = abstained(unanswerable, threshold)
        row["abstain_answerable"] = abstained(answerable, threshold)
        curve.append(row)
    scored = [r for r in records if r["score"] is not None]
    report: dict[str, Any] = {
        "min_score": min_score,
        "kinds": {
            kind: {"questions": len(group), "abstained": abstained(group, min_score)}
            for kind, group in sorted(by_kind.items())
        },
        "answered_right": round(100.0 * right_answered(min_score) / max(len(answerable), 1), 2),
        "ece": round(
            expected_calibration_error([r["score"] for r in scored], [bool(r["right"]) for r in scored]), 4
        ),
        "curve": curve,
    }
    return report


def write_report(report: EvalReport, out_dir: Path) -> tuple[Path, Path]:
    """``report.json`` (the metrics) and ``questions.jsonl`` (one record per question) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics_file = out_dir / "report.json"
    metrics_file.write_text(json.dumps(report.metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    questions_file = out_dir / "questions.jsonl"
    with questions_file.open("w", encoding="utf-8") as fh:
        for record in report.per_question:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return metrics_file, questions_file


def read_run_report(path: str | Path) -> dict[str, Any]:
    """The metrics of a run (``report.json`` in the ``--out`` folder, or beside its ``questions.jsonl``);
    {} when there are none to read."""
    source = Path(path)
    report = (source if source.is_dir() else source.parent) / "report.json"
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_questions(path: str | Path) -> list[dict[str, Any]]:
    """The per-question records of a run: ``questions.jsonl``, or the ``--out`` folder that holds it."""
    source = Path(path)
    if source.is_dir():
        source = source / "questions.jsonl"
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"cannot read the questions of a run from {source}: {first_line(exc)}") from exc
