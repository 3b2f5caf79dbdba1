"""The bi-encoder in fp32 and in int8, side by side: passages per second and SQuAD retrieval recall.

Speed: windows of ``--tokens`` tokens of SQuAD v1.1 train paragraphs (CC BY-SA 4.0, from $SPANQA_DATASETS) are
encoded by both precisions in turns, one batch of ``--batch`` each, so that a machine whose speed drifts
slows both alike. Quality: every paragraph of the SQuAD v1.1 public dev half is the corpus and its questions
the queries (dense search alone, exact cosine): recall@1/5/10 and MRR@10 for fp32, for int8, and for an index
embedded in fp32 asked with int8 queries (an index made before the default changed).

    .venv/bin/python bench/encoder_precision.py --out bench/results/encoder-precision.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_DEV, SQUAD_TRAIN, emit_results, machine
from spanqa.retriever.onnx_encoder import OnnxEncoder
from spanqa.settings import DEFAULT_RETRIEVER_MODEL

PRECISIONS = ("fp32", "int8")


def token_windows(encoder: OnnxEncoder, tokens: int, count: int) -> list[str]:
    """``count`` texts of ``tokens`` word pieces each, cut from SQuAD train paragraphs in order."""
    tokenizer = encoder.tokenizer
    data = json.loads(SQUAD_TRAIN.read_text(encoding="utf-8"))
    windows: list[str] = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            ids = tokenizer(paragraph["context"], add_special_tokens=False)["input_ids"]
            for start in range(0, len(ids) - tokens + 1, tokens):
                windows.append(tokenizer.decode(ids[start : start + tokens]))
                if len(windows) == count:
                    return windows
    return windows


def speed(encoders: dict[str, OnnxEncoder], texts: list[str], batch: int) -> dict[str, Any]:
    """Seconds and passages/s of each precision, encoding the same batches in turns."""
    seconds = dict.fromkeys(encoders, 0.0)
    for encoder in encoders.values():  # untimed: first-run allocations
        encoder.encode(texts[:batch])
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        for name, encoder in encoders.items():
            began = time.perf_counter()
            encoder.encode(part)
            seconds[name] += time.perf_counter() - began
    n = len(texts)
    return {name: {"seconds": round(s, 2), "passages_per_s": round(n / s, 1)} for name, s in seconds.items()}


def squad_corpus(path: Path) -> tuple[list[str], list[str], list[int]]:
    """Paragraphs, questions and each question's paragraph index."""
    data = json.loads(path.read_text(encoding="utf-8"))
    paragraphs: list[str] = []
    questions: list[str] = []
    gold: list[int] = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions.append(qa["question"])
                gold.append(len(paragraphs))
            paragraphs.append(paragraph["context"])
    return paragraphs, questions, gold


def recall(passages: np.ndarray, queries: np.ndarray, gold: list[int]) -> dict[str, float]:
    """Recall@1/5/10 and MRR@10 of exact cosine search (rows are unit vectors)."""
    scores = queries @ passages.T
    top = np.argsort(-scores, axis=1)[:, :10]
    hits = top == np.asarray(gold)[:, None]
    ranks = np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0)
    metrics = {f"recall@{k}": round(100 * float(((ranks > 0) & (ranks <= k)).mean()), 2) for k in (1, 5, 10)}
    metrics["mrr@10"] = round(float(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0).mean()), 4)
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100, help="word pieces per timed passage")
    parser.add_argument("--passages", type=int, default=4000, help="timed passages")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime threads (0: its default)")
    parser.add_argument("--data", type=Path, default=SQUAD_DEV)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        encoders = {
            p: OnnxEncoder(
                model=DEFAULT_RETRIEVER_MODEL,
                cache_dir=cache,
                batch_size=args.batch,
                threads=args.threads,
                precision=p,
            )
            for p in PRECISIONS
        }
        for encoder in encoders.values():
            encoder.warm_up()
        texts = token_windows(encoders["fp32"], args.tokens, args.passages)
        timing = speed(encoders, texts, args.batch)
        paragraphs, questions, gold = squad_corpus(args.data)
        vectors = {p: (e.encode(paragraphs), e.encode(questions)) for p, e in encoders.items()}
    quality = {p: recall(vectors[p][0], vectors[p][1], gold) for p in PRECISIONS}
    quality["fp32 index, int8 queries"] = recall(vectors["fp32"][0], vectors["int8"][1], gold)
    agreement = float(np.mean(np.sum(vectors["fp32"][0] * vectors["int8"][0], axis=1)))
    results = {
        "machine": machine(),
        "model": DEFAULT_RETRIEVER_MODEL,
        "timed_passages": len(texts),
        "tokens_per_passage": args.tokens,
        "speed": timing,
        "speedup": round(timing["fp32"]["seconds"] / timing["int8"]["seconds"], 2),
        "squad_dev": {"paragraphs": len(paragraphs), "questions": len(questions), **quality},
        "mean_cosine_fp32_int8": round(agreement, 4),
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
