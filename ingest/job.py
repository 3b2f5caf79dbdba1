"""The ingest job: files -> text -> chunks -> vectors, with the SQL catalog and the vector index in step."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spanqa.errors import SpanqaError, first_line
from spanqa.ingest.catalog import Catalog, document_id_for
from spanqa.ingest.chunker import CHUNKER_VERSION, chunk_blocks, chunking_signature
from spanqa.ingest.folding import fold_labels
from spanqa.ingest.loaders import SUPPORTED_EXTENSIONS, LoadError, NotADocument, load_file, looks_like_text
from spanqa.ingest.model_check import check_model
from spanqa.ingest.points import make_point
from spanqa.ingest.report import (
    CHANGED,
    FAILED,
    NEW,
    PRUNED,
    SKIPPED,
    UNCHANGED,
    FileOutcome,
    IngestReport,
    Progress,
)
from spanqa.ingest.walk import FoundFile, SkippedFile, inside, walk
from spanqa.retriever.encoder import TextEncoder
from spanqa.retriever.index import ACTIVE_ALIAS, VectorIndex, VectorIndexError, collection_name
from spanqa.settings import Settings
from spanqa.types import Chunk, Document, DocumentStatus

logger = logging.getLogger(__name__)


class IngestError(SpanqaError):
    """The whole run cannot go on (a one-line, user-facing reason)."""


class PathNotFoundError(IngestError):
    """A path given to ingest does not exist."""


@dataclass
class _Prepared:
    found: FoundFile
    document: Document
    chunks: list[Chunk]
    status: str
    old_chunk_ids: set[str]


class IngestJob:
    """Ingest files and folders into the catalog and the active vector collection.

    Args:
        catalog: the SQL catalog.
        encoder: the retriever's bi-encoder (loaded only when a file needs embedding).
        index: the vector index.
        chunk_tokens: tokens per chunk.
        chunk_overlap: tokens shared by consecutive chunks.
        max_file_bytes: larger files are recorded as failed without being read.
        encode_group: chunks gathered across files before one encoder call (bigger batches, faster).
        share_store: give the embedded store to any other process that waits for it, between this run's
            writes (a command's ingest; a server or worker keeps it).
        hnsw_build_at: when at least this many vectors are outside the HNSW graph, build it: after the
            run, and during it after each batch that brings the chunks embedded since the last build to
            this many (0: never; exhaustive search stays exact, but grows with the collection).
        follow_symlinks_out: follow symlinks that lead out of the folder being ingested (off: they are
            skipped and counted, so a link cannot pull in files from elsewhere).
        fold_similarity: a chunk whose cosine to a chunk indexed before it (or earlier in the same batch) is
            at least this joins that chunk's near-duplicate group (``Chunk.fold``); above 1: never.
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        encoder: TextEncoder,
        index: VectorIndex,
        chunk_tokens: int = Settings.chunk_tokens,
        chunk_overlap: int = Settings.chunk_overlap,
        max_file_bytes: int | None = None,
        encode_group: int = 256,
        share_store: bool = False,
        hnsw_build_at: int = 0,
        follow_symlinks_out: bool = Settings.follow_symlinks_out,
        fold_similarity: float = Settings.fold_similarity,
    ) -> None:
        self.catalog = catalog
        self.encoder = encoder
        self.index = index
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap = chunk_overlap
        self.max_file_bytes = max_file_bytes
        self.encode_group = encode_group
        self.share_store = share_store
        self.hnsw_build_at = hnsw_build_at
        #: Told the number of vectors before the HNSW graph is built over them (a long, silent step).
        self.on_build: Callable[[int], None] | None = None
        self.follow_symlinks_out = follow_symlinks_out
        self.fold_similarity = fold_similarity
        self._collection: str | None = None
        #: Files the last discovery left out, by reason (hidden, not text, excluded).
        self.skipped: Counter[str] = Counter()
        self.skipped_files: list[SkippedFile] = []
        self._load_seconds = 0.0
        self._stages: dict[str, float] = {}
        self._encoder_ready = False

    # The run -----------------------------------------------------------------------------------------

    def run(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        on_progress: Callable[[Progress], None] | None = None,
        confine_to: Sequence[Path] = (),
    ) -> IngestReport:
        """Ingest ``paths`` (files or folders).

        Args:
            paths: files and folders.
            prune: mark documents deleted whose files under the given folders have vanished.
            include: only files matching these globs (default: every supported extension).
            exclude: skip files matching these globs.
            on_progress: called after each file.
            confine_to: resolved folders that symlinks may not lead out of (``spanqa serve``'s roots).

        Returns:
            The per-file outcomes.

        Raises:
            PathNotFoundError: a path does not exist (nothing is changed).
        """
        active = self.catalog.active_index()
        if active is not None:
            check_model(active, self.encoder.model_name, self.encoder.pooling)
        found = self.discover(paths, include=include, exclude=exclude, confine_to=confine_to)
        report = self.run_found(found, on_progress=on_progress)
        report.skipped = dict(self.skipped)
        report.skipped_files = list(self.skipped_files)
        if prune:
            report.outcomes.extend(self.prune(paths))
        return report

    def run_found(
        self, found: Sequence[FoundFile], *, on_progress: Callable[[Progress], None] | None = None
    ) -> IngestReport:
        """Ingest files already discovered (a worker ingests one file of a folder this way)."""
        started = time.perf_counter()
        active = self.catalog.active_index()
        if active is not None:
            check_model(active, self.encoder.model_name, self.encoder.pooling)
        report = IngestReport()
        self._stages.clear()
        loaded_before = self._load_seconds
        report.orphans_removed = self.remove_orphans()
        if self.share_store:
            # A question asked meanwhile gets the store as soon as the batch being written is in (and sees
            # every file committed so far); nobody waiting, the collection stays open from batch to batch.
            self.index.lend_when_asked()
        pending: list[_Prepared] = []
        pending_chunks = 0
        since_build = 0  # chunks embedded since the graph was last built (or this run began)
        done = 0

        def emit(outcome: FileOutcome) -> None:
            nonlocal done
            report.outcomes.append(outcome)
            done += 1
            if on_progress is not None:
                loading = self._load_seconds - loaded_before
                on_progress(
                    Progress(done, len(found), report.chunks_embedded, outcome.path, outcome.status, loading)
                )

        for item in found:
            prepared = self._prepare(item)
            if isinstance(prepared, FileOutcome):
                emit(prepared)
                continue
            pending.append(prepared)
            pending_chunks += len(prepared.chunks)
            if pending_chunks >= self.encode_group:
                embedded = report.chunks_embedded
                for outcome in self._index(pending, report):
                    emit(outcome)
                pending, pending_chunks = [], 0
                # A long run builds the graph as it goes: vectors outside it are searched exhaustively, by
                # every batch's near-duplicate check and every ask, so a run that built only at its end
                # would slow down with the square of its size (27 ms per search at a million).
                since_build += report.chunks_embedded - embedded
                if 0 < self.hnsw_build_at <= since_build:
                    since_build = 0
                    self._build_search_index(report)
        for outcome in self._index(pending, report):
            emit(outcome)
        if report.chunks_embedded:
            self._build_search_index(report)
        if self.share_store:
            self.index.release()
        report.seconds = time.perf_counter() - started
        report.load_seconds = self._load_seconds - loaded_before
        report.stage_seconds = dict(self._stages)
        return report

    def discover(
        self,
        paths: Sequence[str | Path],
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        confine_to: Sequence[Path] = (),
    ) -> list[FoundFile]:
        """Every file the run would look at; raises PathNotFoundError for a missing path.

        What it left out is counted by reason in ``self.skipped``.
        """
        self.skipped = Counter()
        self.skipped_files = []
        found: list[FoundFile] = []
        seen: set[str] = set()
        for raw in paths:
            path = Path(raw).expanduser()
            if not path.exists():
                raise PathNotFoundError(f"no such file or folder: {raw}")
            if path.is_dir():
                roots = confine_to or (() if self.follow_symlinks_out else (path.resolve(),))
                items = list(
                    walk(
                        path,
                        extensions=SUPPORTED_EXTENSIONS,
                        include=include,
                        exclude=exclude,
                        is_text=looks_like_text,
                        skipped=self.skipped,
                        skipped_files=self.skipped_files,
                        confine_to=roots,
                    )
                )
            else:
                absolute = path.absolute()
                items = [FoundFile(path=absolute, root=absolute.parent, explicit=True)]
            for item in items:
                key = str(item.path)
                if key not in seen:
                    seen.add(key)
                    found.append(item)
        return found

    # One file ----------------------------------------------------------------------------------------

    def _prepare(self, item: FoundFile) -> _Prepared | FileOutcome:
        path = str(item.path)
        try:
            stat = item.path.stat()
        except OSError as exc:
            return self._fail(item, _os_reason(exc))
        if self.max_file_bytes is not None and stat.st_size > self.max_file_bytes:
            limit_mb = self.max_file_bytes / 1e6
            reason = (
                f"too large ({stat.st_size / 1e6:.1f} MB > {limit_mb:g} MB limit; raise SPANQA_MAX_FILE_MB)"
            )
            return self._fail(item, reason, size=stat.st_size, mtime=stat.st_mtime)
        try:
            with self._stage("read"):
                digest = _sha256(item.path)
        except OSError as exc:
            return self._fail(item, _os_reason(exc), size=stat.st_size, mtime=stat.st_mtime)
        existing = self.catalog.get_document_by_path(path)
        was_indexed = existing is not None and existing.status == DocumentStatus.INDEXED
        format_before = existing.format if existing is not None else None
        chunking = chunking_signature(self.chunk_tokens, self.chunk_overlap, format_before)
        # A document indexed before spanqa recorded how it was cut (None) was cut by the first chunker.
        recorded = existing.chunking if existing is not None else None
        same_cut = recorded == chunking or (recorded is None and CHUNKER_VERSION == 1)
        if (
            existing is not None
            and was_indexed
            and existing.sha256 == digest
            and existing.error is None
            and same_cut
        ):
            return FileOutcome(path, UNCHANGED, existing.num_chunks)
        try:
            with self._stage("load"):
                loaded = load_file(item.path, max_bytes=self.max_file_bytes)
        except NotADocument as exc:
            return self._skip(item, str(exc), existing)
        except LoadError as exc:
            return self._fail(item, str(exc), size=stat.st_size, mtime=stat.st_mtime)
        document_id = document_id_for(path)
        page_starts = [(p.number, p.char_start) for p in loaded.pages]
        self._warm_up_encoder()  # its tokenizer cuts the chunks
        with self._stage("chunk"):
            spans = chunk_blocks(
                loaded.text,
                loaded.blocks,
                self.encoder.tokenizer,
                chunk_tokens=self.chunk_tokens,
                overlap_tokens=self.chunk_overlap,
                page_starts=page_starts,
            )
        if not spans and not loaded.blocks:
            return self._fail(item, "no text found", size=stat.st_size, mtime=stat.st_mtime)
        # A page of nothing but headings and links (a table of contents, a back-of-book index) is indexed
        # with no chunks: it is known and kept in step, but it never fills the passages a question reads.
        chunks = []
        for ordinal, span in enumerate(spans):
            text = loaded.text[span.char_start : span.char_end]
            chunks.append(
                Chunk(
                    id=Chunk.make_id(document_id, ordinal, text),
                    document_id=document_id,
                    ordinal=ordinal,
                    char_start=span.char_start,
                    char_end=span.char_end,
                    text=text,
                    page=span.page,
                    heading=span.heading,
                    segments=tuple((a - span.char_start, b - span.char_start) for a, b in span.segments),
                    title=loaded.text[span.title[0] : span.title[1]] if span.title else "",
                    title_start=span.title[0] if span.title else None,
                )
            )
        document = Document(
            id=document_id,
            path=path,
            relative_path=item.relative_path,
            sha256=digest,
            size=stat.st_size,
            mtime=stat.st_mtime,
            format=loaded.format,
            page_count=len(loaded.pages) or None,
            text=loaded.text,
            num_chunks=len(chunks),
            page_starts=page_starts,
            page_labels=[p.label for p in loaded.pages] if any(p.label for p in loaded.pages) else [],
            chunking=chunking_signature(self.chunk_tokens, self.chunk_overlap, loaded.format),
        )
        old_ids = {c.id for c in self.catalog.chunks_of(document_id)} if existing is not None else set()
        return _Prepared(item, document, chunks, CHANGED if was_indexed else NEW, old_ids)

    def _index(self, batch: list[_Prepared], report: IngestReport) -> list[FileOutcome]:
        """Embed every chunk of ``batch`` in one encoder call, then write points and catalog rows per file."""
        if not batch:
            return []
        collection = self.active_collection()
        chunks = [c for p in batch for c in p.chunks]
        with self._stage("encode"):
            vectors = np.asarray(self.encoder.encode([c.search_text for c in chunks]), dtype=np.float32)
        with self._stage("fold"):
            labels = fold_labels(self.index, self.catalog, collection, chunks, vectors, self.fold_similarity)
        folds = iter(labels)
        outcomes: list[FileOutcome] = []
        row = 0
        for prepared in batch:
            doc = prepared.document
            prepared.chunks = [dataclasses.replace(chunk, fold=next(folds)) for chunk in prepared.chunks]
            with self._stage("sparse"):
                points = [
                    make_point(chunk, doc.path, vectors[row + i]) for i, chunk in enumerate(prepared.chunks)
                ]
            row += len(prepared.chunks)
            # New points first, then the catalog, then the stale points: a crash in between leaves either the
            # old version answerable or orphan points that the next run's remove_orphans() drops.
            with self._stage("store"):
                self.index.upsert(collection, points)
            with self._stage("catalog"):
                self.catalog.save_indexed(doc, prepared.chunks)
            stale = prepared.old_chunk_ids - {c.id for c in prepared.chunks}
            if stale:
                with self._stage("store"):
                    self.index.delete_points(collection, sorted(stale))
            report.chunks_embedded += len(prepared.chunks)
            outcomes.append(FileOutcome(doc.path, prepared.status, len(prepared.chunks)))
        return outcomes

    def _build_search_index(self, report: IngestReport) -> None:
        """Build the HNSW graph when the vectors outside it reach ``hnsw_build_at``; the time it took adds to
        ``report.index_build_seconds``, and ``report.index_build_note`` says why the graph stayed as it was,
        if it did (the files are indexed either way: search is exact without the graph, and the next build
        tries again)."""
        if self.hnsw_build_at <= 0:
            return
        collection = self.active_collection()
        waiting = self.index.stats(collection).unindexed
        if waiting < self.hnsw_build_at:
            return
        seconds, note = build_graph(self.index, collection, waiting, self.on_build)
        report.index_build_seconds += seconds
        report.index_build_note = note  # the last build's: a later one that succeeded clears an earlier note

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        """Count the time the block takes under stage ``name`` of this run."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._stages[name] = self._stages.get(name, 0.0) + time.perf_counter() - started

    def _skip(self, item: FoundFile, reason: str, existing: Document | None) -> FileOutcome:
        """A file with nothing to index: counted under its reason; a version indexed before is dropped."""
        if existing is not None and existing.status != DocumentStatus.DELETED:
            active = self.catalog.active_index()
            if active is not None and self.index.has_collection(active.collection):
                self.index.delete_document(active.collection, existing.id)
            self.catalog.mark_deleted(existing.id)
        self.skipped[reason.split(" (", 1)[0]] += 1
        self.skipped_files.append(SkippedFile(str(item.path), reason, "nothing to index"))
        return FileOutcome(str(item.path), SKIPPED, 0, reason)

    def _fail(self, item: FoundFile, reason: str, *, size: int = 0, mtime: float = 0.0) -> FileOutcome:
        """Record a file that cannot be loaded; a version indexed before stops answering (points dropped)."""
        path = str(item.path)
        had_version = self.catalog.record_failure(
            path=path, relative_path=item.relative_path, error=reason, size=size, mtime=mtime
        )
        if had_version:
            active = self.catalog.active_index()
            if active is not None and self.index.has_collection(active.collection):
                self.index.delete_document(active.collection, document_id_for(path))
        return FileOutcome(path, FAILED, 0, reason)

    # Housekeeping ------------------------------------------------------------------------------------

    def _warm_up_encoder(self) -> None:
        """Load the encoder and its tokenizer once, timing it apart from the ingest work."""
        if not self._encoder_ready:
            started = time.perf_counter()
            self.encoder.warm_up()
            self.encoder.tokenizer  # noqa: B018 - loading it (and transformers) is part of loading the model
            self._load_seconds += time.perf_counter() - started
            self._encoder_ready = True

    def active_collection(self) -> str:
        """The active collection's name; created on first use for the configured encoder."""
        if self._collection is not None:
            return self._collection
        active = self.catalog.active_index()
        if active is None:
            dimension = self.encoder.dimension
            name = collection_name(self.encoder.model_name, dimension)
            self.index.ensure_collection(name, dimension)
            active = self.catalog.create_index_version(
                model_name=self.encoder.model_name,
                dimension=dimension,
                collection=name,
                active=True,
                pooling=self.encoder.pooling,
            )
            self.index.set_alias(ACTIVE_ALIAS, name)
        else:
            check_model(active, self.encoder.model_name, self.encoder.pooling)
            self.index.ensure_collection(active.collection, active.dimension)
        self._collection = active.collection
        return active.collection

    def remove_orphans(self) -> int:
        """Drop points whose chunk the catalog does not hold (left by a crash); returns how many."""
        active = self.catalog.active_index()
        if active is None or not self.index.has_collection(active.collection):
            return 0
        orphans = self.index.point_ids(active.collection) - self.catalog.chunk_ids()
        if orphans:
            logger.warning("removing %d orphan points from %s", len(orphans), active.collection)
            self.index.delete_points(active.collection, sorted(orphans))
        return len(orphans)

    def restore_missing(self) -> int:
        """Embed again the chunks the catalog holds but the active collection lacks; returns how many."""
        active = self.catalog.active_index()
        if active is None:
            return 0
        collection = self.active_collection()
        missing = sorted(self.catalog.chunk_ids() - self.index.point_ids(collection))
        for offset in range(0, len(missing), self.encode_group):
            chunks = list(self.catalog.get_chunks(missing[offset : offset + self.encode_group]).values())
            paths = {d.id: d.path for d in self.catalog.documents_by_id({c.document_id for c in chunks})}
            vectors = self.encoder.encode([c.search_text for c in chunks])
            points = [
                make_point(c, paths.get(c.document_id, ""), v) for c, v in zip(chunks, vectors, strict=True)
            ]
            self.index.upsert(collection, points)
        if missing:
            logger.warning("restored %d missing points in %s", len(missing), collection)
        return len(missing)

    def vanished(self, paths: Sequence[str | Path]) -> list[Document]:
        """The documents under the given folders whose files no longer exist, or (unless symlinks out of
        the folder are followed) are reached through a link that leads out of it."""
        gone: list[Document] = []
        for raw in paths:
            root = Path(raw).expanduser().absolute()
            if root.is_dir():
                roots = () if self.follow_symlinks_out else (root.resolve(),)
                gone.extend(
                    d
                    for d in self.catalog.paths_under(str(root))
                    if not os.path.exists(d.path) or (roots and not inside(d.path, roots))
                )
        return gone

    def prune(self, paths: Sequence[str | Path]) -> list[FileOutcome]:
        """Mark deleted the documents under the given folders whose files no longer exist."""
        active = self.catalog.active_index()
        outcomes = []
        for doc in self.vanished(paths):
            self.remove_document(doc.id, collection=active.collection if active else None)
            outcomes.append(FileOutcome(doc.path, PRUNED, 0))
        return outcomes

    def remove_document(self, document_id: str, *, collection: str | None = None) -> None:
        """Drop a document's points and mark it deleted in the catalog."""
        if collection is None:
            active = self.catalog.active_index()
            collection = active.collection if active else None
        if collection is not None and self.index.has_collection(collection):
            self.index.delete_document(collection, document_id)
        self.catalog.mark_deleted(document_id)


def build_graph(
    index: VectorIndex, collection: str, vectors: int, on_build: Callable[[int], None] | None = None
) -> tuple[float, str | None]:
    """Build ``collection``'s HNSW graph over its ``vectors`` new vectors (``on_build`` is told first): the
    seconds it took, and why the graph stayed as it was, if it did (a failed build is not an error: search
    is exact without the graph, and the next build tries again)."""
    if on_build is not None:
        on_build(vectors)
    started = time.perf_counter()
    note = None
    try:
        index.build_search_index(collection)
    except VectorIndexError as exc:
        note = f"the search index was not built: {first_line(exc)}"
    if note is None:
        logger.info("built the HNSW graph over %d vectors", vectors)
    else:
        logger.warning("%s", note)
    return time.perf_counter() - started, note


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _os_reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower() if exc.strerror else str(exc)
