"""The open-domain SQuAD evaluation: every article becomes a document, every question goes through ask.

Reports retrieval recall@k, reader-only EM/F1 (gold paragraph given), end-to-end EM/F1, the abstention rate,
latency per stage and ingest speed; per-question results go to a JSON-lines file for error analysis.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reader.squad import SquadExample, evaluate_predictions, load_squad, normalize_answer
from spanqa import pipeline
from spanqa.runtime import Runtime

RECALL_AT = (1, 5, 10, 20)


@dataclass
class EvalReport:
    metrics: dict[str, Any]
    per_question: list[dict[str, Any]] = field(default_factory=list)


def article_file_name(index: int, title: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_")[:60] or "article"
    return f"{index:03d}_{slug}.txt"


def write_articles(examples: Sequence[SquadExample], directory: Path) -> int:
    """Write each article as one text document: its title, then its paragraphs, blank-line separated."""
    directory.mkdir(parents=True, exist_ok=True)
    articles: dict[int, tuple[str, list[str]]] = {}
    for ex in examples:
        title, paragraphs = articles.setdefault(ex.article_index, (ex.title, []))
        if ex.context not in paragraphs:
            paragraphs.append(ex.context)
    for index, (title, paragraphs) in sorted(articles.items()):
        text = title.replace("_", " ") + "\n\n" + "\n\n".join(paragraphs)
        (directory / article_file_name(index, title)).write_text(text, encoding="utf-8")
    return len(articles)


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
        on_stage: called with (stage name, number of items) when a stage starts.
        on_progress: called with the number of questions just finished.

    Returns:
        The metrics and one record per question.
    """
    examples = load_squad(data_file)
    questions = examples[:limit] if limit else examples
    if sample:
        questions = sample_questions(questions, sample)
    n_passages = passages or runtime.settings.passages
    corpus = runtime.settings.data_dir / "corpus"
    n_articles = write_articles(examples, corpus)
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
        pipeline.ask(runtime, questions[0].question, passages=n_passages, answers=1)
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
        found = pipeline.search(runtime, ex.question, top_k=depth)
        result = pipeline.ask(runtime, ex.question, passages=n_passages, answers=1, found=found)
        total = time.perf_counter() - t0
        hits = [contains_answer(p.text, golds) for p in found.passages] if golds else []
        recalls = recall_at(hits)
        for k, ok in recalls.items():
            recall_counts[k] += int(ok)
        prediction = result.answers[0].text if result.answers else ""
        end_to_end[ex.id] = prediction
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
                "prediction": prediction,
                "abstained": not result.answers,
                "score": result.answers[0].score if result.answers else None,
                "reader_only_prediction": reader_only[ex.id],
                "first_hit_rank": next((i + 1 for i, h in enumerate(hits) if h), None),
                "answer_path": result.answers[0].path if result.answers else None,
                "timings_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
            }
        )
        if on_progress:
            on_progress(1)
    answerable = [ex for ex in questions if not ex.is_impossible] or list(questions)
    n = max(len(answerable), 1)
    e2e = evaluate_predictions(questions, end_to_end)
    reader_metrics = evaluate_predictions(questions, reader_only)
    metrics: dict[str, Any] = {
        "data": str(data_file),
        "questions": len(questions),
        "selection": _selection(limit, sample),
        "articles": n_articles,
        "chunks": chunks,
        "passages_read": n_passages,
        "retriever_model": runtime.settings.retriever_model,
        "reader_model": runtime.settings.reader_model,
        "reader_precision": runtime.reader.loaded_precision,
        "recall": {f"@{k}": round(100.0 * recall_counts[k] / n, 2) for k in RECALL_AT},
        "reader_only": {
            "exact_match": round(reader_metrics["exact_match"], 2),
            "f1": round(reader_metrics["f1"], 2),
        },
        "end_to_end": {k: round(v, 2) if isinstance(v, float) else v for k, v in e2e.items()},
        "abstention_rate": round(100.0 * sum(r["abstained"] for r in records) / max(len(records), 1), 2),
        "latency": {k: percentiles(v) for k, v in stage_times.items()},
        "ingest": {
            "files": len(report.outcomes),
            "failed": report.count("failed"),
            "seconds": round(ingest_seconds, 2),
            "chunks_per_s": round(chunks / ingest_seconds, 2) if ingest_seconds > 0 else 0.0,
        },
    }
    return EvalReport(metrics, records)


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
