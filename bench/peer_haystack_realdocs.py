"""The real-documents dev set (bench/realdocs.py) asked of Haystack 3.4: the same pages, questions and rules.

Runs in Haystack's own venv (see bench/peer_haystack.py for its setup, plus `pip install trafilatura` for
Haystack's HTML converter) and never imports spanqa:

    /root/haystack-venv/bin/python bench/peer_haystack_realdocs.py --retrieval hybrid --threads 2 \
        --out bench/results/peer_haystack-realdocs-hybrid.json

The pages under the questions file's ``root`` that match its ``include`` globs (less ``exclude``, with
spanqa's matching rule) are converted by HTMLToDocument, split by DocumentSplitter (150 words, 30 of
overlap, as in bench/peer_haystack.py), embedded with the packaged all-MiniLM-L6-v2 and written to an
InMemoryDocumentStore. ``--retrieval dense`` searches with the embedding retriever; ``hybrid`` adds
InMemoryBM25Retriever and joins both by reciprocal rank fusion (each side returns 50 before the join, as
spanqa's hybrid does). The reader is TransformersExtractiveReader over the shipped spanqa reader in fp32,
top 3 answers, 10 passages. Every metric is computed by bench/realdocs_rules.py, as for spanqa.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peer_haystack import (
    DEFAULT_READER,
    HYBRID_CANDIDATES,
    Problems,
    default_retriever,
    import_components,
    make_reader,
    normalize_answer,
    summarize,
    versions,
)
from bench.realdocs_rules import (
    DEFAULT_QUESTIONS,
    glob_matches,
    load_questions,
    score_question,
    summarize_outcomes,
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS, help="The questions JSON.")
    parser.add_argument("--retrieval", choices=("dense", "hybrid"), default="hybrid")
    parser.add_argument("--passages", type=int, default=10, help="Passages the reader reads.")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default).")
    parser.add_argument("--reader", default=str(DEFAULT_READER), help="Local reader folder.")
    parser.add_argument(
        "--retriever", default=default_retriever(), help="Local sentence-transformers folder."
    )
    parser.add_argument("--limit", type=int, help="Ask only the first N questions.")
    parser.add_argument("--out", type=Path, help="Write the results as JSON here.")
    args = parser.parse_args()

    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    from haystack.components.converters import HTMLToDocument

    problems = Problems()
    hs = import_components(problems)
    meta, questions = load_questions(args.questions)
    root = Path(meta["root"])
    if not root.is_dir():
        raise SystemExit(f"{root} not found; run: apt-get install {meta.get('package', 'git-doc')}")
    files = sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and glob_matches(path.relative_to(root).as_posix(), meta.get("include", []))
        and not glob_matches(path.relative_to(root).as_posix(), meta.get("exclude", []))
    )
    depth = max(10, args.passages)

    started = time.perf_counter()
    documents = HTMLToDocument(store_full_path=True).run(sources=[str(f) for f in files])["documents"]
    splitter = hs["DocumentSplitter"](split_by="word", split_length=150, split_overlap=30)
    chunks = splitter.run(documents=documents)["documents"]
    embedder = hs["SentenceTransformersDocumentEmbedder"](
        model=args.retriever,
        local_files_only=True,
        batch_size=64,
        progress_bar=False,
        normalize_embeddings=True,
    )
    embedder.warm_up()
    store = hs["InMemoryDocumentStore"](embedding_similarity_function="cosine")
    store.write_documents(embedder.run(documents=chunks)["documents"])
    ingest_s = time.perf_counter() - started
    print(f"ingest: {len(files)} files, {len(chunks)} chunks in {ingest_s:.1f} s", file=sys.stderr)

    text_embedder = hs["SentenceTransformersTextEmbedder"](
        model=args.retriever, local_files_only=True, progress_bar=False, normalize_embeddings=True
    )
    text_embedder.warm_up()
    candidates = max(depth, HYBRID_CANDIDATES) if args.retrieval == "hybrid" else depth
    dense = hs["InMemoryEmbeddingRetriever"](document_store=store, top_k=candidates)
    bm25 = hs["InMemoryBM25Retriever"](document_store=store, top_k=candidates)
    joiner = hs["DocumentJoiner"](join_mode="reciprocal_rank_fusion", top_k=depth)
    reader = make_reader(hs, args.reader, top_k=3)

    def page_of(document: Any) -> str:
        return Path(document.meta.get("file_path", "")).relative_to(root).as_posix()

    def ask(question: str) -> tuple[list[Any], list[str], float, float]:
        t0 = time.perf_counter()
        embedding = text_embedder.run(text=question)["embedding"]
        found = dense.run(query_embedding=embedding)["documents"]
        if args.retrieval == "hybrid":
            found = joiner.run(documents=[found, bm25.run(query=question)["documents"]])["documents"]
        found = found[:depth]
        t1 = time.perf_counter()
        answers = reader.run(query=question, documents=found[: args.passages], top_k=3)["answers"]
        predictions = [a.data for a in answers if a.data]
        return found, predictions, t1 - t0, time.perf_counter() - t0

    asked = questions[: args.limit] if args.limit else questions
    ask(asked[0].question)  # untimed warm-up
    outcomes, search_s, ask_s, misses = [], [], [], []
    for number, q in enumerate(asked, 1):
        found, predictions, searched, total = ask(q.question)
        search_s.append(searched)
        ask_s.append(total)
        outcome, rank = score_question(
            q, [(page_of(d), d.content or "") for d in found], predictions, normalize_answer
        )
        outcomes.append(outcome)
        if not outcome["answer_right"]:
            got = predictions[0] if predictions else None
            misses.append(
                {"id": q.id, "question": q.question, "expected": q.answers, "got": got, "rank": rank}
            )
        if number % 20 == 0:
            print(f"asked {number}/{len(asked)}", file=sys.stderr)

    results = {
        "peer": "haystack",
        "bench": "realdocs",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "retrieval": args.retrieval,
        "versions": versions(),
        "questions": len(asked),
        "passages": args.passages,
        "ingest": {"files": len(files), "chunks": len(chunks), "seconds": round(ingest_s, 1)},
        **summarize_outcomes(asked, outcomes),
        "search_ms": summarize(search_s),
        "ask_ms": summarize(ask_s),
        "problems": problems.items,
        "misses": misses,
    }
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
