"""Ask latency: real MiniLM retriever + a 6-layer MiniLM-size reader over 10 passages, warm.

    .venv/bin/python bench/ask.py --questions 50 --out bench/results/ask.json

The corpus is SQuAD v1.1 train articles (CC BY-SA 4.0, read from ../shared/datasets) written to a temp
folder and ingested with the default chunking (200-token chunks). The reader is the shipped one when it is
in reader/models, else all-MiniLM-L6-v2 with an untrained span head (same size, same speed).
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
from reader.model import SHIPPED_MODELS_DIR
from retriever.encoder import resolve_encoder_model
from spanqa import pipeline
from spanqa.runtime import Runtime
from spanqa.settings import CHOICES, DEFAULT_READER_MODEL, Settings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--passages", type=int, default=10)
    parser.add_argument("--corpus-chars", type=int, default=600_000)
    parser.add_argument(
        "--reader", help="Reader name or path (default: shipped, else untrained MiniLM head)."
    )
    for option in ("backend", "precision"):
        name = f"reader_{option}"
        parser.add_argument(f"--{option}", choices=CHOICES[name], default="auto", help=name)
    parser.add_argument("--batch-size", type=int, help="reader_batch_size (default: the setting's default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    reader = args.reader
    if reader is None:
        shipped = SHIPPED_MODELS_DIR / DEFAULT_READER_MODEL
        reader = str(shipped) if shipped.is_dir() else resolve_encoder_model("all-MiniLM-L6-v2")
    work = Path(tempfile.mkdtemp(prefix="spanqa-bench-ask-"))
    _, questions = write_corpus(work / "docs", min_chars=args.corpus_chars)
    settings = Settings.load(
        environ={},
        data_dir=work / "data",
        reader_model=reader,
        reader_backend=args.backend,
        reader_precision=args.precision,
        **({"reader_batch_size": args.batch_size} if args.batch_size else {}),
    )
    with Runtime(settings) as runtime:
        report = runtime.ingest_job().run([work / "docs"])
        runtime.reader.warm_up()
        sample = random.Random(3).sample(questions, min(args.questions, len(questions)))
        for q in sample[:5]:
            pipeline.ask(runtime, q, passages=args.passages)
        stages: dict[str, list[float]] = {"total": [], "encode": [], "search": [], "read": []}
        windows = 0
        for q in sample:
            started = time.perf_counter()
            result = pipeline.ask(runtime, q, passages=args.passages)
            stages["total"].append(time.perf_counter() - started)
            for key in ("encode", "search", "read"):
                stages[key].append(result.timings[key])
            windows += len(result.passages)
        chunks = runtime.catalog.counts()["chunks"]
    results = {
        "benchmark": "ask",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "reader_model": reader,
        "reader_backend": type(runtime.reader._model).__name__,
        "reader_precision": runtime.reader.loaded_precision,
        "reader_batch_size": runtime.reader.batch_size,
        "retriever_model": settings.retriever_model,
        "files": len(report.outcomes),
        "chunks": chunks,
        "chunk_tokens": settings.chunk_tokens,
        "passages_per_question": args.passages,
        "questions": len(sample),
        "latency": {key: summarize_ms(values) for key, values in stages.items()},
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
