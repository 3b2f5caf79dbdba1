"""Ingest throughput and search latency with the real MiniLM retriever.

    .venv/bin/python bench/ingest.py --chunks 10000 --out bench/results/ingest.json

Writes a corpus of SQuAD v1.1 train articles (CC BY-SA 4.0; read from $SPANQA_DATASETS, never copied into
the repo) to a temporary folder, ingests it into a fresh data directory with about 100-token chunks, then
times `spanqa search` queries (query encoding included) against the full index.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit_results, machine, summarize_ms, write_corpus
from spanqa import pipeline
from spanqa.runtime import Runtime
from spanqa.settings import CHOICES, Settings
from spanqa.types import SearchOptions


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--chunks", type=int, default=10000, help="Stop adding articles after about this many chunks."
    )
    parser.add_argument("--chunk-tokens", type=int, default=100)
    parser.add_argument("--overlap", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--encoder-precision", choices=CHOICES["encoder_precision"], default=Settings.encoder_precision
    )
    parser.add_argument("--out", type=Path, help="Write the results as JSON here too.")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spanqa-bench-"))
    # About 560 characters per 100-token chunk of Wikipedia English, plus the overlap.
    chars, questions = write_corpus(work / "docs", min_chars=int(args.chunks * 560 * 0.85))
    settings = Settings.load(
        environ={},
        data_dir=work / "data",
        chunk_tokens=args.chunk_tokens,
        chunk_overlap=args.overlap,
        encoder_precision=args.encoder_precision,
    )
    with Runtime(settings) as runtime:
        runtime.encoder.warm_up()
        job = runtime.ingest_job()
        started = time.perf_counter()
        report = job.run([work / "docs"])
        ingest_seconds = time.perf_counter() - started
        chunks = runtime.catalog.counts()["chunks"]
        rng = random.Random(5)
        sample = rng.sample(questions, min(args.queries, len(questions)))
        for q in sample[:10]:  # warm-up
            pipeline.search(runtime, q, SearchOptions(top_k=10))
        totals, encodes, searches = [], [], []
        for q in sample:
            t0 = time.perf_counter()
            result = pipeline.search(runtime, q, SearchOptions(top_k=10))
            totals.append(time.perf_counter() - t0)
            encodes.append(result.timings["encode"])
            searches.append(result.timings["search"])
    results = {
        "benchmark": "ingest+search",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "retriever_model": settings.retriever_model,
        "encoder_precision": getattr(runtime.encoder, "precision", "fp32"),
        "files": len(report.outcomes),
        "characters": chars,
        "chunks": chunks,
        "chunk_tokens": args.chunk_tokens,
        "ingest_seconds": round(ingest_seconds, 1),
        # Where the time went (the rest: walking, hashing bookkeeping, progress).
        "stage_seconds": {stage: round(t, 1) for stage, t in sorted(report.stage_seconds.items())},
        "ingest_chunks_per_s": round(chunks / ingest_seconds, 1),
        "search_total": summarize_ms(totals),
        "search_encode": summarize_ms(encodes),
        "search_index": summarize_ms(searches),
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
