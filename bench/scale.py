"""How the embedded store searches at scale: up to a million passages with the structure of real ones.

Real passages (SQuAD v1.1 train paragraphs cut into windows of about ``--words`` words, CC BY-SA 4.0, read
from $SPANQA_DATASETS, plus any ``*.txt`` under ``--texts``) are embedded by the default retriever; the rest
up to ``--total`` are derived from them (each a real vector mixed with another real one and a little noise,
then normalized, with the first one's BM25 terms): not uniform random vectors, whose neighbourhoods look
nothing like text's. The points go into a fresh embedded store, the HNSW graph is built, and SQuAD train
questions are asked.

Reports: upsert and HNSW build time; search p50 / p95 for dense, lexical and hybrid (weighted fusion, as
``retrieval = hybrid``); dense recall@10 of HNSW against exact search (numpy over every vector); the store's
size on disk; the peak RSS of a separate process that opens the store and asks.

    .venv/bin/python bench/scale.py --real 100000 --total 1000000 --data-dir /tmp/scale \
        --out bench/results/scale.json

``--embeddings FILE.npz`` keeps the real embeddings between runs (embedding is most of a first run).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_TRAIN, emit_results, machine, summarize_ms
from spanqa.retriever.index import EdgeVectorIndex, IndexPoint
from spanqa.retriever.lexical import Bm25Encoder, SparseVector, weighted_score_fusion
from spanqa.retriever.onnx_encoder import OnnxEncoder
from spanqa.settings import CHOICES, DEFAULT_RETRIEVER_MODEL, Settings

COLLECTION = "scale"
BATCH = 2000


def passages_and_questions(words: int, texts: Path | None) -> tuple[list[str], list[str]]:
    """Windows of about ``words`` words of SQuAD train paragraphs (and of ``texts``), and its questions."""
    data = json.loads(SQUAD_TRAIN.read_text(encoding="utf-8"))
    sources: list[str] = []
    questions: list[str] = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            sources.append(paragraph["context"])
            questions.extend(qa["question"] for qa in paragraph["qas"])
    if texts is not None:
        sources.extend(
            path.read_text(encoding="utf-8", errors="replace") for path in sorted(texts.rglob("*.txt"))
        )
    passages = []
    for source in sources:
        tokens = source.split()
        for start in range(0, len(tokens), words):
            window = tokens[start : start + words]
            if len(window) >= words // 3:
                passages.append(" ".join(window))
    return passages, questions


def rss_of_an_asking_process(path: Path, queries: np.ndarray, limit: int) -> float:
    """Peak RSS (MB) of a fresh process that opens the store and runs the dense searches."""
    np.save(path.parent / "queries.npy", queries)
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from spanqa.retriever.index import EdgeVectorIndex\n"
        f"index = EdgeVectorIndex({str(path)!r})\n"
        f"for q in np.load({str(path.parent / 'queries.npy')!r}):\n"
        f"    index.search({COLLECTION!r}, q, limit={limit})\n"
        # VmHWM, not ru_maxrss: Linux carries a forked parent's peak into the child's ru_maxrss.
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1]) / 1024


def fill(
    index: EdgeVectorIndex,
    ids: list[str],
    vectors: np.ndarray,
    terms: list[SparseVector],
    sources: np.ndarray,
) -> tuple[float, float]:
    """Upsert every point, then build the HNSW graph: the seconds of each."""
    index.ensure_collection(COLLECTION, vectors.shape[1])
    started = time.perf_counter()
    for start in range(0, len(ids), BATCH):
        index.upsert(
            COLLECTION,
            [
                IndexPoint(
                    id=ids[i],
                    vector=vectors[i],
                    sparse=terms[int(sources[i])],
                    payload={"document_id": f"d{int(sources[i]) % 5000}", "path": "p"},
                )
                for i in range(start, min(start + BATCH, len(ids)))
            ],
        )
    upsert_seconds = time.perf_counter() - started
    started = time.perf_counter()
    index.build_search_index(COLLECTION)
    return upsert_seconds, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--real", type=int, default=100_000, help="Real passages embedded.")
    parser.add_argument("--total", type=int, default=1_000_000, help="Points in the store.")
    parser.add_argument("--words", type=int, default=60, help="Words per passage.")
    parser.add_argument("--texts", type=Path, help="More real text: every *.txt under this folder.")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data-dir", type=Path, required=True, help="A new folder for the store.")
    parser.add_argument("--embeddings", type=Path, help="Keep (or reuse) the real embeddings here (.npz).")
    parser.add_argument(
        "--quantization",
        choices=CHOICES["vector_quantization"],
        default=Settings.vector_quantization,
        help="How the store keeps the vectors (the vector_quantization setting).",
    )
    parser.add_argument(
        "--searches-only",
        action="store_true",
        help="Ask over the store an earlier run left in --data-dir (same --real, --total, --texts and "
        "--embeddings): search settings measured again without a new build.",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.searches_only and not (args.data_dir / "qdrant" / COLLECTION).is_dir():
        raise SystemExit(f"{args.data_dir} holds no store of an earlier run")
    if not args.searches_only and args.data_dir.exists() and any(args.data_dir.iterdir()):
        raise SystemExit(f"{args.data_dir} is not empty: give a new --data-dir")

    passages, questions = passages_and_questions(args.words, args.texts)
    if len(passages) < args.real:
        raise SystemExit(f"only {len(passages)} real passages (add --texts, or lower --real)")
    rng = random.Random(7)
    passages = rng.sample(passages, args.real)
    # The encoder an ingest uses by default (ONNX Runtime, int8): what a user's million passages would get.
    encoder = OnnxEncoder(model=DEFAULT_RETRIEVER_MODEL, cache_dir=Settings().model_cache, precision="int8")
    started = time.perf_counter()
    if args.embeddings is not None and args.embeddings.is_file():
        real = np.load(args.embeddings)["vectors"][: args.real]
    else:
        real = np.concatenate(
            [encoder.encode(passages[i : i + 256]) for i in range(0, len(passages), 256)]
        ).astype(np.float32)
        if args.embeddings is not None:
            np.savez(args.embeddings, vectors=real)
    embed_seconds = time.perf_counter() - started

    # Derived points: a real vector mixed with another and a little noise, so that neighbourhoods keep the
    # shape of real text's (clusters of near passages), with the first one's terms.
    generator = np.random.default_rng(11)
    bm25 = Bm25Encoder()
    terms = [bm25.document(text) for text in passages]
    vectors = np.empty((args.total, real.shape[1]), dtype=np.float32)
    vectors[: args.real] = real
    derived = args.total - args.real
    first = generator.integers(0, args.real, size=derived)
    second = generator.integers(0, args.real, size=derived)
    mix = generator.uniform(0.05, 0.3, size=(derived, 1)).astype(np.float32)
    noise = generator.standard_normal((derived, real.shape[1])).astype(np.float32) * 0.02
    vectors[args.real :] = (1 - mix) * real[first] + mix * real[second] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sources = np.concatenate([np.arange(args.real), first])

    store = args.data_dir / "qdrant"
    index = EdgeVectorIndex(store, quantization=args.quantization)
    ids = [str(uuid.UUID(int=i + 1)) for i in range(args.total)]
    timings = (None, None) if args.searches_only else fill(index, ids, vectors, terms, sources)
    upsert_seconds, build_seconds = timings
    stats = index.stats(COLLECTION)

    asked = rng.sample(questions, args.queries)
    query_vectors = encoder.encode(asked).astype(np.float32)
    # Two passes over the same questions: the first reads the store's files as a new process does, the
    # second as a server that has asked for a while.
    passes: list[dict[str, list[float]]] = []
    recalls = []
    for _ in range(2):
        times: dict[str, list[float]] = {"dense": [], "lexical": [], "hybrid": []}
        for text, query in zip(asked, query_vectors, strict=True):
            t0 = time.perf_counter()
            hits = index.search(COLLECTION, query, limit=10)
            times["dense"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            index.search_lexical(COLLECTION, bm25.query(text), limit=10)
            times["lexical"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            both = (
                index.search(COLLECTION, query, limit=20),
                index.search_lexical(COLLECTION, bm25.query(text), limit=20),
            )
            weighted_score_fusion([{h.id: h.score for h in both[0]}, {h.id: h.score for h in both[1]}])
            times["hybrid"].append(time.perf_counter() - t0)
            if not passes:
                exact = np.argpartition(-(vectors @ query), 10)[:10]
                recalls.append(len({ids[i] for i in exact} & {h.id for h in hits}) / 10)
        passes.append(times)
    index.close()
    disk_mb = sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 1e6
    rss_mb = rss_of_an_asking_process(store, query_vectors[:50], 10)
    results: dict[str, Any] = {
        "benchmark": "scale",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "real_passages": args.real,
        "quantization": args.quantization,
        "points": stats.points,
        "hnsw_indexed": stats.indexed,
        "dimension": int(vectors.shape[1]),
        "embed_seconds": round(embed_seconds, 1),
        "upsert_seconds": None if upsert_seconds is None else round(upsert_seconds, 1),
        "hnsw_build_seconds": None if build_seconds is None else round(build_seconds, 1),
        **{f"search_{kind}": summarize_ms(seconds) for kind, seconds in passes[0].items()},
        "second_pass": {f"search_{kind}": summarize_ms(seconds) for kind, seconds in passes[1].items()},
        "dense_recall_at_10_vs_exact": round(float(np.mean(recalls)), 4),
        "disk_mb": round(disk_mb, 1),
        "asking_process_peak_rss_mb": round(rss_mb, 1),
        "bench_process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    emit_results(results, args.out)
    (store.parent / "queries.npy").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
