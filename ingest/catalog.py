"""The SQL catalog: documents, chunks, index versions and jobs (SQLAlchemy 2; SQLite by default)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from spanqa.types import Chunk, Document, DocumentStatus, IndexStatus, IndexVersion, Job

logger = logging.getLogger(__name__)

DOCUMENT_ID_NAMESPACE = uuid.UUID("0b8f6d1e-3f0e-4a57-8f5c-5a4f2f7b9a11")


class CatalogError(RuntimeError):
    """The catalog database cannot be opened or used."""


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


class ChunkRow(Base):
    __tablename__ = "chunks"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    document_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    ordinal: Mapped[int] = mapped_column(Integer)
    char_start: Mapped[int] = mapped_column(Integer)
    char_end: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text)


class IndexVersionRow(Base):
    __tablename__ = "index_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_name: Mapped[str] = mapped_column(String(512))
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


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers and one writer work at once; the busy timeout waits out a writer instead of failing.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


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
        created_at=row.created_at,
        updated_at=row.updated_at,
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
    )


def _to_index_version(row: IndexVersionRow) -> IndexVersion:
    return IndexVersion(
        id=row.id,
        model_name=row.model_name,
        dimension=row.dimension,
        collection=row.collection,
        status=IndexStatus(row.status),
        created_at=row.created_at,
    )


class Catalog:
    """Documents, chunks, index versions and jobs in one SQL database.

    Args:
        url: a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        is_sqlite = url.startswith("sqlite")
        if is_sqlite and ":memory:" not in url:
            Path(url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(url, future=True, pool_pre_ping=not is_sqlite)
            if is_sqlite:
                event.listen(self.engine, "connect", _sqlite_pragmas)
            Base.metadata.create_all(self.engine)
        except SQLAlchemyError as exc:
            raise CatalogError(f"cannot open the catalog at {self.safe_url}: {_short(exc)}") from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def safe_url(self) -> str:
        """The URL with any password masked."""
        return self.mask(self.url)

    @staticmethod
    def mask(url: str) -> str:
        """``url`` with any password masked, safe to print."""
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)

    def session(self) -> Session:
        return self._sessions()

    def close(self) -> None:
        self.engine.dispose()

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
                        if len(reference) >= 6
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
                    DocumentRow.path.startswith(prefix), DocumentRow.status != DocumentStatus.DELETED.value
                )
            ).all()
            return [_to_document(r, with_text=False) for r in rows]

    def save_indexed(self, document: Document, chunks: Sequence[Chunk]) -> None:
        """Store a document and replace its chunks in one transaction."""
        now = _now()
        with self.session() as s, s.begin():
            row = s.get(DocumentRow, document.id)
            if row is None:
                row = DocumentRow(id=document.id, created_at=now)
                s.add(row)
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
                )
                for c in chunks
            )

    def record_failure(
        self, *, path: str, relative_path: str, error: str, size: int = 0, mtime: float = 0.0
    ) -> bool:
        """Record that a file could not be loaded.

        A document that was indexed before keeps its text, chunks and status (nothing answerable is lost);
        only its error is set. Returns True when an indexed version was kept.
        """
        document_id = document_id_for(path)
        now = _now()
        with self.session() as s, s.begin():
            row = s.get(DocumentRow, document_id)
            if row is not None and row.status == DocumentStatus.INDEXED.value:
                row.error = f"last update failed: {error}"
                row.updated_at = now
                return True
            if row is None:
                row = DocumentRow(id=document_id, path=path, created_at=now)
                s.add(row)
            row.relative_path = relative_path
            row.status = DocumentStatus.FAILED.value
            row.error = error
            row.size = size
            row.mtime = mtime
            row.sha256 = ""
            row.text = ""
            row.num_chunks = 0
            row.updated_at = now
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == document_id))
            return False

    def mark_deleted(self, document_id: str) -> None:
        """Mark a document deleted and drop its chunks (its points must be dropped by the caller)."""
        with self.session() as s, s.begin():
            s.execute(delete(ChunkRow).where(ChunkRow.document_id == document_id))
            s.execute(
                update(DocumentRow)
                .where(DocumentRow.id == document_id)
                .values(
                    status=DocumentStatus.DELETED.value, text="", num_chunks=0, sha256="", updated_at=_now()
                )
            )

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
        self, *, model_name: str, dimension: int, collection: str, active: bool
    ) -> IndexVersion:
        with self.session() as s, s.begin():
            row = IndexVersionRow(
                model_name=model_name,
                dimension=dimension,
                collection=collection,
                status=(IndexStatus.ACTIVE if active else IndexStatus.BUILDING).value,
            )
            s.add(row)
            s.flush()
            return _to_index_version(row)

    def activate_index_version(self, version_id: int) -> None:
        """Make one version active and retire the others, in one transaction."""
        with self.session() as s, s.begin():
            s.execute(
                update(IndexVersionRow)
                .where(IndexVersionRow.status == IndexStatus.ACTIVE.value)
                .values(status=IndexStatus.RETIRED.value)
            )
            s.execute(
                update(IndexVersionRow)
                .where(IndexVersionRow.id == version_id)
                .values(status=IndexStatus.ACTIVE.value)
            )

    # Jobs ---------------------------------------------------------------------------------------------

    def create_job(self, kind: str, arguments: dict[str, Any], job_id: str | None = None) -> Job:
        with self.session() as s, s.begin():
            row = JobRow(id=job_id or uuid.uuid4().hex, kind=kind, arguments=arguments, state="pending")
            s.add(row)
            s.flush()
            return _to_job(row)

    def update_job(self, job_id: str, **values: Any) -> None:
        values["updated_at"] = _now()
        with self.session() as s, s.begin():
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))

    def advance_job(self, job_id: str, *, done: int = 0, failed: int = 0) -> Job | None:
        """Add to a job's counters atomically (many workers report on one job); finish it when all are in."""
        with self.session() as s, s.begin():
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
        with self.session() as s, s.begin():
            row = s.get(WatchedFolderRow, path)
            if row is None:
                row = WatchedFolderRow(path=path)
                s.add(row)
            row.include = list(include)
            row.exclude = list(exclude)

    def unwatch_folder(self, path: str) -> bool:
        with self.session() as s, s.begin():
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


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
