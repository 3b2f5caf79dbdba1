"""Ask latency: real MiniLM retriever + a 6-layer MiniLM-size reader over 10 passages, warm.

    .venv/bin/python bench/ask.py --questions 40 --out bench/results/ask.json
    .venv/bin/python bench/ask.py --questions 40 --compare auto:0,fp32:0,fp32:4 \
        --out bench/results/ask-compare.json

The corpus is SQuAD v1.1 train articles (CC BY-SA 4.0, read from $SPANQA_DATASETS) written to a temp
folder and ingested with the default chunking (200-token chunks). The reader is the shipped one when it is
in reader/models, else all-MiniLM-L6-v2 with an untrained span head (same size, same speed).

`--compare PRECISION:BATCH,...` times several reader settings in one process over the same index, taking
turns question by question, so that a slow minute of a shared machine slows every setting alike: on a
virtual machine whose speed drifts between runs, only such paired numbers compare settings fairly.
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
from spanqa.reader.model import SHIPPED_MODELS_DIR
from spanqa.reader.reader import ExtractiveReader
from spanqa.retriever.encoder import resolve_encoder_model
from spanqa.runtime import Runtime
from spanqa.settings import CHOICES, DEFAULT_READER_MODEL, Settings, SettingsError
from spanqa.types import AskOptions

STAGES = ("total", "encode", "search", "read")
# Untimed first questions: the first asks of each reader warm caches and thread pools.
WARM_UP = 5


def reader_settings(
    settings: Settings, compare: str | None, precision: str, batch_size: int
) -> list[Settings]:
    """One Settings per reader to time: each ``PRECISION:BATCH`` item of ``compare``, else the single one."""
    items = compare.split(",") if compare else [f"{precision}:{batch_size}"]
    pairs = [item.partition(":")[::2] for item in items]
    try:
        return [settings.replace(reader_precision=p, reader_batch_size=b) for p, b in pairs]
    except SettingsError as exc:
        raise SystemExit(f"--compare {compare}: {exc} (items are PRECISION:BATCH_SIZE)") from None


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
    parser.add_argument("--batch-size", type=int, default=0, help="reader_batch_size (0: the device's)")
    parser.add_argument("--compare", help="PRECISION:BATCH,... reader settings timed in turns")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    reader_model = args.reader
    if reader_model is None:
        shipped = SHIPPED_MODELS_DIR / DEFAULT_READER_MODEL
        reader_model = str(shipped) if shipped.is_dir() else resolve_encoder_model("all-MiniLM-L6-v2")
    work = Path(tempfile.mkdtemp(prefix="spanqa-bench-ask-"))
    _, questions = write_corpus(work / "docs", min_chars=args.corpus_chars)
    settings = Settings.load(
        environ={}, data_dir=work / "data", reader_model=reader_model, reader_backend=args.backend
    )
    configs = reader_settings(settings, args.compare, args.precision, args.batch_size)
    with Runtime(settings) as runtime:
        report = runtime.ingest_job().run([work / "docs"])
        readers = [ExtractiveReader.from_settings(config) for config in configs]
        for reader in readers:
            reader.warm_up()
        sample = random.Random(3).sample(questions, min(args.questions + WARM_UP, len(questions)))
        times: list[dict[str, list[float]]] = [{key: [] for key in STAGES} for _ in readers]
        for position, question in enumerate(sample):
            warming = position < WARM_UP
            for reader, stages in zip(readers, times, strict=True):
                runtime._reader = reader  # the bench swaps readers over one open index
                started = time.perf_counter()
                result = pipeline.ask(runtime, question, AskOptions(passages=args.passages))
                if warming:
                    continue
                stages["total"].append(time.perf_counter() - started)
                for key in ("encode", "search", "read"):
                    stages[key].append(result.timings[key])
        chunks = runtime.catalog.counts()["chunks"]
    runs = [
        {
            "reader_backend": type(reader._model).__name__,
            "reader_precision": reader.loaded_precision,
            "reader_batch_size": reader.batch_size,
            "latency": {key: summarize_ms(values) for key, values in stages.items()},
        }
        for reader, stages in zip(readers, times, strict=True)
    ]
    results = {
        "benchmark": "ask",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "reader_model": DEFAULT_READER_MODEL if args.reader is None else reader_model,
        "retriever_model": settings.retriever_model,
        "files": len(report.outcomes),
        "chunks": chunks,
        "chunk_tokens": settings.chunk_tokens,
        "passages_per_question": args.passages,
        "questions": len(sample) - WARM_UP,
        **(runs[0] if len(runs) == 1 else {"compare": runs}),
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
