"""Retrieval and answer-scoring variants side by side on SQuAD in the open setting, over one index.

    SPANQA_TORCH_THREADS=2 .venv/bin/python bench/squad_variants.py --sample 500 \
        --data-dir /tmp/spanqa-squad-variants --out bench/results/squad-variants.json

Every article of ``--data`` (the public SQuAD v1.1 dev half by default; CC BY-SA 4.0) is written as one text
file and ingested once (as ``spanqa eval squad`` does; with ``--data-dir`` a later run re-uses the index).
Then each question of the sample is searched with every retrieval variant (dense; lexical; hybrid with
reciprocal rank fusion; hybrid with weighted score fusion), the top ``--passages`` of each are read once, and
the answer is picked with every ``--weights`` value of ``retriever_weight`` from that one reading, so the
variants differ only in what they are meant to vary. Reports recall@1/5/10/20 (a passage holding a gold
answer) per retrieval variant and end-to-end EM/F1 per (variant, weight), with the same scoring as
``spanqa eval squad``; the questions are the ``--sample`` whose SHA-1 of the id sorts first.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_DEV, emit_results, machine
from spanqa import pipeline
from spanqa.evaluation import RECALL_AT, contains_answer, recall_at, sample_questions, write_articles
from spanqa.reader.answers import AnswerBuilder, read_passages
from spanqa.reader.squad import evaluate_predictions, load_squad
from spanqa.runtime import Runtime
from spanqa.settings import Settings
from spanqa.types import SearchOptions

VARIANTS: dict[str, dict[str, str]] = {
    "dense": {"retrieval": "dense"},
    "lexical": {"retrieval": "lexical"},
    "hybrid-rrf": {"retrieval": "hybrid", "fusion": "rrf"},
    "hybrid-weighted": {"retrieval": "hybrid", "fusion": "weighted"},
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=SQUAD_DEV, help="SQuAD-format JSON.")
    parser.add_argument("--sample", type=int, default=500, help="Questions asked (spread over articles).")
    parser.add_argument("--data-dir", type=Path, help="Keep the index here (re-used when it exists).")
    parser.add_argument("--passages", type=int, default=10, help="Passages the reader reads.")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="Retrieval variants to compare.")
    parser.add_argument("--weights", default="0,0.05,0.1,0.2,0.3", help="retriever_weight values.")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Other settings.")
    parser.add_argument("--out", type=Path, help="Write the results as JSON here.")
    args = parser.parse_args()

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s): {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    weights = [float(w) for w in args.weights.split(",")]
    overrides = dict(pair.split("=", 1) for pair in args.set)
    data_dir = args.data_dir or Path(f"/tmp/spanqa-squad-variants-{int(time.time())}")
    settings = Settings.load(data_dir=data_dir, **overrides)

    examples = load_squad(args.data)
    questions = sample_questions(examples, args.sample) if args.sample else examples
    depth = max(max(RECALL_AT), args.passages)
    results: dict[str, Any] = {
        "bench": "squad_variants",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": str(args.data),
        "questions": len(questions),
        "passages": args.passages,
        "settings": {
            k: settings.public_dict()[k] for k in ("chunk_tokens", "chunk_overlap", "lexical_weight")
        },
        "machine": machine(),
    }
    with Runtime(settings) as runtime:
        corpus = data_dir / "corpus"
        write_articles(examples, corpus)
        started = time.perf_counter()
        report = runtime.ingest_job().run([corpus])
        results["ingest"] = {
            "summary": report.summary(),
            "chunks": runtime.catalog.counts()["chunks"],
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(f"ingested: {results['ingest']}", file=sys.stderr)
        runtime.reader.warm_up()
        recalls = {v: dict.fromkeys(RECALL_AT, 0) for v in variants}
        predictions: dict[str, dict[str, str]] = {f"{v}@{w}": {} for v in variants for w in weights}
        search_ms: dict[str, list[float]] = {v: [] for v in variants}
        for number, ex in enumerate(questions, start=1):
            golds = [a.text for a in ex.answers]
            for variant in variants:
                runtime.settings = settings.replace(**VARIANTS[variant])
                t0 = time.perf_counter()
                found = pipeline.search(runtime, ex.question, SearchOptions(top_k=depth))
                search_ms[variant].append((time.perf_counter() - t0) * 1000)
                hits = [contains_answer(p.text, golds) for p in found.passages]
                for k, ok in recall_at(hits).items():
                    recalls[variant][k] += int(ok)
                read = found.passages[: args.passages]
                result = read_passages(runtime.reader, ex.question, read)
                for weight in weights:
                    builder = AnswerBuilder(
                        retriever_weight=weight, no_answer_threshold=settings.no_answer_threshold, answers=1
                    )
                    picked = builder.run(result, read)
                    predictions[f"{variant}@{weight}"][ex.id] = picked[0].text if picked else ""
            if number % 50 == 0:
                print(f"asked {number}/{len(questions)}", file=sys.stderr)
    n = max(len(questions), 1)
    results["recall"] = {
        v: {f"@{k}": round(100 * c / n, 2) for k, c in counts.items()} for v, counts in recalls.items()
    }
    results["search_p50_ms"] = {v: round(sorted(ms)[len(ms) // 2], 2) for v, ms in search_ms.items() if ms}
    results["end_to_end"] = {
        key: {k: round(v, 2) for k, v in evaluate_predictions(questions, preds).items()}
        for key, preds in predictions.items()
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
