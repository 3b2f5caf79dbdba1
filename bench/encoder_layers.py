"""The bi-encoder with some of its layers only, untrained: the speed each layer costs, and the recall.

A smaller encoder is the lever left for ingest speed on a CPU without VNNI (#29): this measures the two ends
a distilled student would start from. Each variant keeps the listed transformer layers of the shipped
encoder (torch, fp32, mean pooling); nothing is retrained. Speed: the paragraphs of the SQuAD v1.1 public dev
half (CC BY-SA 4.0, from $SPANQA_DATASETS), encoded batch by batch by every variant in turns, so that a
machine whose speed drifts slows all alike. Quality: those paragraphs as the corpus and their questions as
the queries, exact cosine: recall@1/5/10 and MRR@10.

    .venv/bin/python bench/encoder_layers.py --variants 0-5 0-2 0,2,4 0,1,3,5 \
        --out bench/results/encoder-layers.json
    .venv/bin/python bench/encoder_layers.py --variants 0-5 0,2,4 --students runs/distill-024/final

``--students`` adds trained smaller encoders (``spanqa retriever train --loss distill --keep-layers ...``),
measured the same way beside the cut ones.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_DEV, emit_results, machine
from bench.encoder_precision import recall, squad_corpus
from spanqa.retriever.encoder import resolve_encoder_model
from spanqa.retriever.onnx_encoder import pool
from spanqa.retriever.training import keep_layers
from spanqa.settings import DEFAULT_RETRIEVER_MODEL


def parse_layers(text: str) -> list[int]:
    """ "0-2" -> [0, 1, 2]; "0,2,4" -> [0, 2, 4]."""
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(part) for part in text.split(",")]


class Variant:
    """The shipped encoder cut down to ``layers``; ``encode`` returns unit vectors in the texts' order."""

    def __init__(self, folder: str, layers: list[int] | None, max_length: int) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()
        # None: a trained student, already as deep as it is meant to be.
        self.layers = (
            list(range(self.model.config.num_hidden_layers))
            if layers is None
            else keep_layers(self.model, layers)
        )
        self.max_length = max_length

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        pooled = pool(hidden.numpy(), batch["attention_mask"].numpy(), "mean")
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def encode_all(
    variants: dict[str, Variant], texts: list[str], batch: int
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Every variant's seconds and vectors of ``texts``, batch by batch in turns (length-sorted batches)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    seconds = dict.fromkeys(variants, 0.0)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in variants}
    for start in range(0, len(order), batch):
        chunk = [texts[i] for i in order[start : start + batch]]
        for name, variant in variants.items():
            began = time.perf_counter()
            parts[name].append(variant.encode(chunk))
            seconds[name] += time.perf_counter() - began
    inverse = np.argsort(order)
    vectors = {name: np.concatenate(chunks)[inverse] for name, chunks in parts.items()}
    return seconds, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["0-5", "0-2", "0,2,4", "0,1,3,5"])
    parser.add_argument(
        "--students",
        nargs="*",
        default=[],
        help="Trained smaller encoders: the final/ folder of `spanqa retriever train --loss distill`.",
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", type=Path, default=SQUAD_DEV)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    folder = resolve_encoder_model(DEFAULT_RETRIEVER_MODEL)
    variants = {v: Variant(folder, parse_layers(v), args.max_length) for v in args.variants}
    variants.update({f"student {path}": Variant(path, None, args.max_length) for path in args.students})
    paragraphs, questions, gold = squad_corpus(args.data)
    seconds, passage_vectors = encode_all(variants, paragraphs, args.batch)
    _, query_vectors = encode_all(variants, questions, args.batch)
    full = max(variants, key=lambda v: len(variants[v].layers))
    results = {
        "machine": machine(),
        "model": DEFAULT_RETRIEVER_MODEL,
        "precision": "fp32 (torch)",
        "paragraphs": len(paragraphs),
        "questions": len(questions),
        "variants": {
            name: {
                "layers": variants[name].layers,
                "paragraphs_per_s": round(len(paragraphs) / seconds[name], 1),
                "speedup": round(seconds[full] / seconds[name], 2),
                **recall(passage_vectors[name], query_vectors[name], gold),
            }
            for name in variants
        },
    }
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
