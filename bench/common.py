"""Helpers shared by the benchmarks: corpus building, percentiles, machine description."""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
from pathlib import Path
from typing import Any

from spanqa.evaluation import percentile

#: Where the benchmarks find SQuAD (``squad-v1.1-train.json``, ``squad-v1.1-dev-public.json``):
#: ``$SPANQA_DATASETS``, else ``shared/datasets`` beside the repository's folder.
_BESIDE = Path(__file__).resolve().parents[2] / "shared" / "datasets"
DATASETS = Path(os.environ.get("SPANQA_DATASETS") or _BESIDE)
SQUAD_TRAIN = DATASETS / "squad-v1.1-train.json"
SQUAD_DEV = DATASETS / "squad-v1.1-dev-public.json"


def summarize_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "mean_ms": round(statistics.fmean(ms), 2) if ms else float("nan"),
        "n": len(ms),
    }


def emit_results(results: dict[str, Any], out: Path | None) -> None:
    """Print the results as JSON and, with ``out``, write them there too (what every bench reports)."""
    text = json.dumps(results, indent=2)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def machine() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    # What int8 speed-ups depend on: VNNI does int8 dot products in one instruction, AVX2 in three.
    vector = [f for f in ("avx512_vnni", "avx_vnni", "avx512f", "avx2") if f in flags]
    return {
        "cpu": cpu,
        "isa": vector[0] if vector else "other",
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }


def squad_articles(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)["data"]


def write_corpus(directory: Path, *, min_chars: int, seed: int = 13) -> tuple[int, list[str]]:
    """Write SQuAD train articles (one .txt per article) until ``min_chars`` characters; return questions.

    Falls back to a generated English-like text when the SQuAD file is not in ``DATASETS``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    questions: list[str] = []
    if SQUAD_TRAIN.is_file():
        for index, article in enumerate(squad_articles(SQUAD_TRAIN)):
            text = (
                article["title"].replace("_", " ")
                + "\n\n"
                + "\n\n".join(p["context"] for p in article["paragraphs"])
            )
            (directory / f"{index:04d}_{article['title'][:40]}.txt").write_text(text, encoding="utf-8")
            questions.extend(qa["question"] for p in article["paragraphs"] for qa in p["qas"])
            written += len(text)
            if written >= min_chars:
                break
        return written, questions
    rng = random.Random(seed)
    words = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
    ]
    words += [
        "river",
        "city",
        "football",
        "team",
        "science",
        "history",
        "energy",
        "music",
        "light",
        "water",
        "government",
        "music",
    ]
    index = 0
    while written < min_chars:
        sentences = [
            " ".join(rng.choice(words) for _ in range(rng.randint(8, 25))).capitalize() + "."
            for _ in range(300)
        ]
        text = " ".join(sentences)
        (directory / f"generated_{index:04d}.txt").write_text(text, encoding="utf-8")
        written += len(text)
        index += 1
    questions = [" ".join(rng.choice(words) for _ in range(8)) + "?" for _ in range(500)]
    return written, questions
