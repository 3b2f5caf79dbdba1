"""Catalog operations on SQLite and PostgreSQL: insert 10,000 chunks, then time the queries asks and
`spanqa status` make.

    .venv/bin/python bench/catalog.py --out bench/results/catalog.json
    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test .venv/bin/python bench/catalog.py

PostgreSQL runs in a throwaway schema of the database at $DATABASE_URL (default: the local `test` database)
and is skipped, saying why, when it does not answer.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit_results, machine, summarize_ms
from spanqa.ingest.catalog import Catalog, document_id_for
from spanqa.types import Chunk, Document

WORDS = ["the", "of", "river", "city", "team", "energy", "music", "light", "water", "history", "season"]


def make_document(index: int, chunks_per_document: int, rng: random.Random) -> tuple[Document, list[Chunk]]:
    path = f"/corpus/doc{index:05d}.txt"
    doc_id = document_id_for(path)
    pieces = [" ".join(rng.choice(WORDS) for _ in range(80)) for _ in range(chunks_per_document)]
    text = "\n\n".join(pieces)
    chunks, offset = [], 0
    for ordinal, piece in enumerate(pieces):
        chunks.append(
            Chunk(Chunk.make_id(doc_id, ordinal, piece), doc_id, ordinal, offset, offset + len(piece), piece)
        )
        offset += len(piece) + 2
    document = Document(
        id=doc_id,
        path=path,
        relative_path=path[1:],
        sha256=f"{index:064x}",
        size=len(text),
        mtime=0.0,
        format="txt",
        text=text,
        num_chunks=len(chunks),
    )
    return document, chunks


def run(url: str, documents: int, chunks_per_document: int, queries: int) -> dict[str, Any]:
    rng = random.Random(7)
    catalog = Catalog(url)
    data = [make_document(i, chunks_per_document, rng) for i in range(documents)]
    started = time.perf_counter()
    for document, chunks in data:
        catalog.save_indexed(document, chunks)
    insert_seconds = time.perf_counter() - started
    all_ids = [c.id for _, chunks in data for c in chunks]
    status, hydrate, lookup = [], [], []
    for _ in range(queries):
        t0 = time.perf_counter()
        catalog.counts()
        catalog.active_index()
        status.append(time.perf_counter() - t0)
        ids = rng.sample(all_ids, 10)
        t0 = time.perf_counter()
        catalog.get_chunks(ids)
        hydrate.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        catalog.get_document_by_path(rng.choice(data)[0].path)
        lookup.append(time.perf_counter() - t0)
    total_chunks = catalog.counts()["chunks"]
    catalog.close()
    return {
        "chunks": total_chunks,
        "insert_seconds": round(insert_seconds, 2),
        "insert_chunks_per_s": round(total_chunks / insert_seconds, 1),
        "status_query": summarize_ms(status),
        "get_10_chunks": summarize_ms(hydrate),
        "document_by_path": summarize_ms(lookup),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--chunks-per-document", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "benchmark": "catalog",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
    }
    sqlite_file = Path(tempfile.mkdtemp(prefix="spanqa-bench-catalog-")) / "catalog.sqlite3"
    results["sqlite"] = run(
        f"sqlite:///{sqlite_file}", args.documents, args.chunks_per_document, args.queries
    )
    pg_url = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    try:
        import sqlalchemy

        engine = sqlalchemy.create_engine(pg_url, connect_args={"connect_timeout": 3})
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
        separator = "&" if "?" in pg_url else "?"
        try:
            results["postgresql"] = run(
                f"{pg_url}{separator}options=-csearch_path%3D{schema}",
                args.documents,
                args.chunks_per_document,
                args.queries,
            )
        finally:
            with engine.begin() as conn:
                conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
            engine.dispose()
    except sqlalchemy.exc.OperationalError as exc:
        results["postgresql"] = {"skipped": f"no PostgreSQL at {pg_url}: {str(exc).splitlines()[0]}"}
    emit_results(results, args.out)


if __name__ == "__main__":
    main()
