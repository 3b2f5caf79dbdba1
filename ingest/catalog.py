"""The SQL catalog: documents, chunks, index versions and jobs (SQLAlchemy 2; SQLite by default)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Self

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from spanqa.errors import first_line
from spanqa.ingest.db import CatalogError, display_url, lock_key, make_engine, report_unavailable
from spanqa.ingest.migrations import upgrade
from spanqa.types import Chunk, Document, DocumentStatus, IndexStatus, IndexVersion, Job

#: The shortest id prefix that finds a document (shorter ones would match too many).
MIN_ID_PREFIX = 6

DOCUMENT_ID_NAMESPACE = uuid.UUID("0b8f6d1e-3f0e-4a57-8f5c-5a4f2f7b9a11")


def _now() -> datetime:
    return datetime.now(UTC)


def document_id_for(path: str) -> str:
    """The stable id of the document at an absolute path."""
    return str(uuid.uuid5(DOCUMENT_ID_NAMESPACE, path))


class Base(DeclarativeBase):
    pass


class DocumentRow(Base):
    __tablename__ = "documents"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    path: Mapped[str] = mapped_column(String(4096), unique=True, index=True)
    relative_path: Mapped[str] = mapped_column(String(4096))
    sha256: Mapped[str] = mapped_column(String(64), default="")
    size: Mapped[int] = mapped_column(Integer, default=0)
    mtime: Mapped[float] = mapped_column(Float, default=0.0)
    format: Mapped[str] = mapped_column(String(16), default="")
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    page_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text, default="")
    num_chunks: Mapped[int] = mapped_column(Integer, default=0)
    page_starts: Mapped[list[list[int]]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    chunking: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # One printed label per page, beside page_starts (revision 0008); NULL: none known.
    page_labels: Mapped[list[str | None] | None] = mapped_column(JSON, nullable=True)


class ChunkRow(Base):
    __tablename__ = "chunks"
    # A document cannot hold two chunks at one position (revision 0002).
    __table_args__ = (Index("uq_chunks_document_ordinal", "document_id", "ordinal", unique=True),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    document_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    ordinal: Mapped[int] = mapped_column(Integer)
    char_start: Mapped[int] = mapped_column(Integer)
    char_end: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    # The heading path above the chunk, its blocks and its entry's title (revision 0003).
    heading: Mapped[str] = mapped_column(Text, default="", server_default="")
    segments: Mapped[list[list[int]] | None] = mapped_column(JSON, nullable=True)
    title: Mapped[str] = mapped_column(Text, default="", server_default="")
    title_start: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The near-duplicate group it was folded into at ingest (revision 0006); NULL: its own.
    fold: Mapped[str | None] = mapped_column(String(36), nullable=True)


ONE_ACTIVE = "status = 'active'"


class IndexVersionRow(Base):
    __tablename__ = "index_versions"
    # At most one active version (revision 0002): a partial unique index on PostgreSQL and SQLite.
    __table_args__ = (
        Index(
            "uq_index_versions_one_active",
            "status",
            unique=True,
            postgresql_where=text(ONE_ACTIVE),
            sqlite_where=text(ONE_ACTIVE),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_name: Mapped[str] = mapped_column(String(512))
    pooling: Mapped[str] = mapped_column(String(16), default="auto", server_default="auto")
    dimension: Mapped[int] = mapped_column(Integer)
    collection: Mapped[str] = mapped_column(String(255), unique=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class JobRow(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), index=True)
    total: Mapped[int] = mapped_column(Integer, default=0)
    done: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class WatchedFolderRow(Base):
    __tablename__ = "watched_folders"

    path: Mapped[str] = mapped_column(String(4096), primary_key=True)
    include: Mapped[list[str]] = mapped_column(JSON, default=list)
    exclude: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


def _to_document(row: DocumentRow, *, with_text: bool = True) -> Document:
    return Document(
        id=row.id,
        path=row.path,
        relative_path=row.relative_path,
        sha256=row.sha256,
        size=row.size,
        mtime=row.mtime,
        format=row.format,
        status=DocumentStatus(row.status),
        error=row.error,
        page_count=row.page_count,
        text=row.text if with_text else "",
        num_chunks=row.num_chunks,
        page_starts=[(int(p[0]), int(p[1])) for p in row.page_starts or []],
        page_labels=list(row.page_labels or []),
        created_at=row.created_at,
        updated_at=row.updated_at,
        chunking=row.chunking,
    )


def _to_chunk(row: ChunkRow) -> Chunk:
    return Chunk(
        id=row.id,
        document_id=row.document_id,
        ordinal=row.ordinal,
        char_start=row.char_start,
        char_end=row.char_end,
        text=row.text,
        page=row.page,
        heading=row.heading or "",
        segments=tuple((int(a), int(b)) for a, b in row.segments or ()),
        title=row.title or "",
        title_start=row.title_start,
        fold=row.fold,
    )


def _to_index_version(row: IndexVersionRow) -> IndexVersion:
    return IndexVersion(
        id=row.id,
        model_name=row.model_name,
        pooling=row.pooling,
        dimension=row.dimension,
        collection=row.collection,
        status=IndexStatus(row.status),
        created_at=row.created_at,
    )


class Catalog:
    """Documents, chunks, index versions and jobs in one SQL database.

    The schema is migrated to the newest revision on first use (see :mod:`ingest.migrations`).

    Args:
        url: a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).

    Raises:
        CatalogError: the database cannot be opened or migrated, or its schema is newer than this code
            (``SchemaTooNewError``).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine: Engine = make_engine(url)
        except (SQLAlchemyError, OSError, ImportError) as exc:
            raise CatalogError(f"cannot open the catalog at {self.safe_url}: {first_line(exc)}") from exc
        self._is_sqlite = self.engine.dialect.name == "sqlite"
        try:
            upgrade(self.engine)
        except BaseException:
            self.engine.dispose()
            raise
        # Opened: from now on a failing database is a one-line error that a worker retries.
        report_unavailable(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password masked."""
        return display_url(self.url)

    def session(self) -> Session:
        return self._sessions()

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        """A session in one write transaction, committed at the end.

        On SQLite the write lock is taken up front (``BEGIN IMMEDIATE``): a transaction that reads before it
        writes would otherwise fail at once with "database is locked" when another connection wrote in
        between; waiting for the lock honours the busy timeout instead.
        """
        with self.session() as s, s.begin():
            if self._is_sqlite:
                s.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield s

    @staticmethod
    def _insert_missing(s: Session, entity: type[Base], values: dict[str, Any]) -> None:
        """Insert a row unless one with the same key exists, without failing when another transaction
        inserts it at the same time (it waits for that one to finish)."""
        dialect = s.get_bind().dialect.name
        # Each dialect's insert is imported where it is used: PostgreSQL's pulls in asyncio and costs every
        # SQLite command (a one-shot `spanqa ask`) 20 ms.
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as postgresql_insert

            s.execute(postgresql_insert(entity).values(**values).on_conflict_do_nothing())
        elif dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            s.execute(sqlite_insert(entity).values(**values).on_conflict_do_nothing())
        else:
            try:
                with s.begin_nested():
                    s.execute(insert(entity).values(**values))
            except IntegrityError:
                pass

    @staticmethod
    def _serialize(s: Session, name: str) -> None:
        """Make transactions that touch ``name`` run one at a time (until commit). SQLite write transactions
        already do; PostgreSQL takes a transaction-level advisory lock."""
        if s.get_bind().dialect.name == "postgresql":
            s.execute(select(func.pg_advisory_xact_lock(lock_key(name))))

    def _claim_document(
        self, s: Session, document_id: str, *, path: str, relative_path: str, status: DocumentStatus
    ) -> DocumentRow:
        """The document's row, inserted if missing and locked until the transaction ends.

        Two workers writing the same document (a file saved twice, two tasks for one path) then take turns
        instead of one failing on the primary key or interleaving chunk deletes and inserts.
        """
        now = _now()
        self._insert_missing(
            s,
            DocumentRow,
            {
                "id": document_id,
                "path": path,
                "relative_path": relative_path,
                "status": status.value,
                "created_at": now,
                "updated_at": now,
            },
        )
        row = s.get(DocumentRow, document_id, with_for_update=True, populate_existing=True)
        if row is None:
            raise CatalogError(f"cannot store {path}: the catalog holds this path under another document id")
        return row

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Documents ---------------------------------------------------------------------------------------

    def get_document(self, document_id: str, *, with_text: bool = True) -> Document | None:
        with self.session() as s:
            row = s.get(DocumentRow, document_id)
            return _to_document(row, with_text=with_text) if row else None

    def get_document_by_path(self, path: str, *, with_text: bool = False) -> Document | None:
        with self.session() as s:
            row = s.scalars(select(DocumentRow).where(DocumentRow.path == path)).first()
            return _to_document(row, with_text=with_text) if row else None

    def find_documents(self, reference: str) -> list[Document]:
        """Documents whose id, id prefix, absolute or relative path equals ``reference``."""
        with self.session() as s:
            rows = s.scalars(
                select(DocumentRow).where(
                    (DocumentRow.id == reference)
                    | (DocumentRow.path == reference)
                    | (DocumentRow.relative_path == reference)
                    | (
                        DocumentRow.id.startswith(reference)
                        if len(reference) >= MIN_ID_PREFIX
                        else DocumentRow.id == reference
                    )
                )
            ).all()
            return [_to_document(r, with_text=False) for r in rows]

    def list_documents(self, *, status: DocumentStatus | None = None) -> list[Document]:
        """Documents without their text, ordered by path."""
        with self.session() as s:
            query = select(DocumentRow).order_by(DocumentRow.path)
            if status is not None:
                query = query.where(DocumentRow.status == status.value)
            return [_to_document(r, with_text=False) for r in s.scalars(query)]

    def documents_by_id(self, document_ids: Iterable[str]) -> list[Document]:
        """Documents (without text) for the given ids."""
        ids = list(document_ids)
        with self.session() as s:
            rows = s.scalars(select(DocumentRow).where(DocumentRow.id.in_(ids))).all()
            return [_to_document(r, with_text=False) for r in rows]

    def paths_under(self, root: str) -> list[Document]:
        """Live (not deleted) documents whose absolute path lies under ``root``."""
        prefix = root.rstrip("/") + "/"
        with self.session() as s:
            rows = s.scalars(
                select(DocumentRow).where(
                    DocumentRow.path.startswith(prefix, autoescape=True),
                    DocumentRow.status != DocumentStatus.DELETED.value,
                )
            ).all()
            return [_to_document(r, with_text=False) for r in rows]

    def save_indexed(self, document: Document, chunks: Sequence[Chunk]) -> None:
        """Store a document and replace its chunks in one transaction (workers racing on it take turns)."""
        now = _now()
        with self._writing() as s:
            row = self._claim_document(
                s,
                document.id,
                path=document.path,
                relative_path=document.relative_path,
                status=DocumentStatus.INDEXED,
            )
            row.path = document.path
            row.relative_path = document.relative_path
            row.sha256 = document.sha256
            row.size = document.size
            row.mtime = document.mtime
            row.format = document.format
            row.status = DocumentStatus.INDEXED.value
            row.error = None
            row.page_count = document.page_count
            row.text = document.text
            row.num_chunks = len(chunks)
            row.page_starts = [[number, start] for number, start in document.page_starts]
            row.page_labels = list(document.page_labels) or None
            row.chunking = document.chunking
            row.updated_at = now
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == document.id))
            s.add_all(
                ChunkRow(
                    id=c.id,
                    document_id=document.id,
                    ordinal=c.ordinal,
                    char_start=c.char_start,
                    char_end=c.char_end,
                    page=c.page,
                    text=c.text,
                    heading=c.heading,
                    segments=[[a, b] for a, b in c.segments] or None,
                    title=c.title,
                    title_start=c.title_start,
                    fold=c.fold,
                )
                for c in chunks
            )

    def record_failure(
        self, *, path: str, relative_path: str, error: str, size: int = 0, mtime: float = 0.0
    ) -> bool:
        """Record that a file could not be loaded: it is failed, with its reason, and has no chunks.

        An indexed version is dropped too (its text is no longer what the file holds, so it must not answer);
        returns True when there was one, so that the caller drops its points as well.
        """
        document_id = document_id_for(path)
        with self._writing() as s:
            row = self._claim_document(
                s, document_id, path=path, relative_path=relative_path, status=DocumentStatus.FAILED
            )
            was_indexed = row.status == DocumentStatus.INDEXED.value
            row.relative_path = relative_path
            row.status = DocumentStatus.FAILED.value
            row.error = error
            row.size = size
            row.mtime = mtime
            row.sha256 = ""
            row.text = ""
            row.num_chunks = 0
            row.updated_at = _now()
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == document_id))
            return was_indexed

    def mark_deleted(self, document_id: str) -> None:
        """Mark a document deleted and drop its chunks (its points must be dropped by the caller)."""
        with self._writing() as s:
            # The document row first (it locks it), then its chunks: the order save_indexed uses, so the two
            # cannot deadlock.
            s.execute(
                update(DocumentRow)
                .where(DocumentRow.id == document_id)
                .values(
                    status=DocumentStatus.DELETED.value, text="", num_chunks=0, sha256="", updated_at=_now()
                )
            )
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == document_id))

    def page_starts(self, document_ids: Iterable[str]) -> dict[str, list[tuple[int, int]]]:
        """Per document, its (page number, char offset) list; documents without pages are left out."""
        ids = list(set(document_ids))
        with self.session() as s:
            rows = s.execute(
                select(DocumentRow.id, DocumentRow.page_starts).where(DocumentRow.id.in_(ids))
            ).all()
        return {doc_id: [(int(p[0]), int(p[1])) for p in pages] for doc_id, pages in rows if pages}

    # Chunks -------------------------------------------------------------------------------------------

    def chunks_of(self, document_id: str) -> list[Chunk]:
        with self.session() as s:
            rows = s.scalars(
                select(ChunkRow).where(ChunkRow.document_id == document_id).order_by(ChunkRow.ordinal)
            )
            return [_to_chunk(r) for r in rows]

    def get_chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        ids = list(chunk_ids)
        out: dict[str, Chunk] = {}
        with self.session() as s:
            for offset in range(0, len(ids), 500):
                rows = s.scalars(select(ChunkRow).where(ChunkRow.id.in_(ids[offset : offset + 500])))
                out.update((r.id, _to_chunk(r)) for r in rows)
        return out

    def chunk_ids(self) -> set[str]:
        with self.session() as s:
            return set(s.scalars(select(ChunkRow.id)))

    def iter_chunks(self, batch_size: int = 1000) -> Iterable[list[Chunk]]:
        """Every chunk, in batches (for re-indexing without re-parsing)."""
        last = ""
        while True:
            with self.session() as s:
                rows = s.scalars(
                    select(ChunkRow).where(ChunkRow.id > last).order_by(ChunkRow.id).limit(batch_size)
                ).all()
            if not rows:
                return
            last = rows[-1].id
            yield [_to_chunk(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Documents per status and the number of chunks."""
        with self.session() as s:
            per_status = dict(
                s.execute(select(DocumentRow.status, func.count()).group_by(DocumentRow.status)).all()
            )
            chunks = s.scalar(select(func.count()).select_from(ChunkRow)) or 0
        out = {status.value: int(per_status.get(status.value, 0)) for status in DocumentStatus}
        out["chunks"] = int(chunks)
        return out

    # Index versions -----------------------------------------------------------------------------------

    def active_index(self) -> IndexVersion | None:
        with self.session() as s:
            row = s.scalars(
                select(IndexVersionRow).where(IndexVersionRow.status == IndexStatus.ACTIVE.value)
            ).first()
            return _to_index_version(row) if row else None

    def index_versions(self) -> list[IndexVersion]:
        with self.session() as s:
            return [
                _to_index_version(r) for r in s.scalars(select(IndexVersionRow).order_by(IndexVersionRow.id))
            ]

    def create_index_version(
        self, *, model_name: str, dimension: int, collection: str, active: bool, pooling: str = "auto"
    ) -> IndexVersion:
        """Record a vector collection; ``active`` makes it the one questions are answered from (any other
        active version is retired).

        Two workers creating the first collection at once both name it after the model: the second gets the
        version the first created (made active if ``active``) instead of a unique-constraint error.
        """
        with self._writing() as s:
            self._serialize(s, "index_versions")
            row = s.scalars(select(IndexVersionRow).where(IndexVersionRow.collection == collection)).first()
            if row is not None and (
                row.model_name != model_name or row.dimension != dimension or row.pooling != pooling
            ):
                raise CatalogError(
                    f"collection {collection} is already recorded for {row.model_name} "
                    f"({row.dimension} dims, {row.pooling} pooling)"
                )
            if row is None:
                if active:
                    self._retire_active(s)
                row = IndexVersionRow(
                    model_name=model_name,
                    pooling=pooling,
                    dimension=dimension,
                    collection=collection,
                    status=(IndexStatus.ACTIVE if active else IndexStatus.BUILDING).value,
                )
                s.add(row)
            elif active and row.status != IndexStatus.ACTIVE.value:
                self._retire_active(s)
                row.status = IndexStatus.ACTIVE.value
            s.flush()
            return _to_index_version(row)

    def activate_index_version(self, version_id: int) -> None:
        """Make one version active and retire the others, in one transaction (one activation at a time)."""
        with self._writing() as s:
            self._serialize(s, "index_versions")
            self._retire_active(s)
            s.execute(
                update(IndexVersionRow)
                .where(IndexVersionRow.id == version_id)
                .values(status=IndexStatus.ACTIVE.value)
            )

    @staticmethod
    def _retire_active(s: Session) -> None:
        s.execute(
            update(IndexVersionRow)
            .where(IndexVersionRow.status == IndexStatus.ACTIVE.value)
            .values(status=IndexStatus.RETIRED.value)
        )

    # Jobs ---------------------------------------------------------------------------------------------

    def create_job(self, kind: str, arguments: dict[str, Any], job_id: str | None = None) -> Job:
        with self._writing() as s:
            row = JobRow(id=job_id or uuid.uuid4().hex, kind=kind, arguments=arguments, state="pending")
            s.add(row)
            s.flush()
            return _to_job(row)

    def update_job(self, job_id: str, **values: Any) -> None:
        values["updated_at"] = _now()
        with self._writing() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))

    def advance_job(self, job_id: str, *, done: int = 0, failed: int = 0) -> Job | None:
        """Add to a job's counters atomically (many workers report on one job); finish it when all are in.

        The UPDATE locks the row until commit, so concurrent reports take turns and exactly one of them sees
        the last file in and finishes the job.
        """
        with self._writing() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(done=JobRow.done + done, failed=JobRow.failed + failed, updated_at=_now())
            )
            row = s.get(JobRow, job_id, populate_existing=True, with_for_update=True)
            if row is None:
                return None
            if row.state == "running" and row.total and row.done + row.failed >= row.total:
                row.state = "failed" if row.failed else "done"
            return _to_job(row)

    def get_job(self, job_id: str) -> Job | None:
        with self.session() as s:
            row = s.get(JobRow, job_id)
            return _to_job(row) if row else None

    def list_jobs(self, limit: int = 20) -> list[Job]:
        with self.session() as s:
            rows = s.scalars(select(JobRow).order_by(JobRow.created_at.desc()).limit(limit))
            return [_to_job(r) for r in rows]

    # Watched folders ----------------------------------------------------------------------------------

    def watch_folder(self, path: str, *, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        with self._writing() as s:
            self._insert_missing(s, WatchedFolderRow, {"path": path, "created_at": _now()})
            row = s.get(WatchedFolderRow, path, with_for_update=True, populate_existing=True)
            assert row is not None
            row.include = list(include)
            row.exclude = list(exclude)

    def unwatch_folder(self, path: str) -> bool:
        with self._writing() as s:
            row = s.get(WatchedFolderRow, path)
            if row is None:
                return False
            s.delete(row)
            return True

    def watched_folders(self) -> list[dict[str, Any]]:
        with self.session() as s:
            rows = s.scalars(select(WatchedFolderRow).order_by(WatchedFolderRow.path)).all()
            return [
                {"path": r.path, "include": list(r.include or []), "exclude": list(r.exclude or [])}
                for r in rows
            ]


def _to_job(row: JobRow) -> Job:
    return Job(
        id=row.id,
        kind=row.kind,
        arguments=dict(row.arguments or {}),
        state=row.state,
        total=row.total,
        done=row.done,
        failed=row.failed,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
