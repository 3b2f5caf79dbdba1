"""The catalog's database, below both the catalog and its migrations: the engine, the lock key, the error.

:mod:`ingest.catalog` (the tables and their queries) and :mod:`ingest.migrations` (the schema's history) both
build on this module and never on each other's internals, so neither import needs the other's module.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import OperationalError

from spanqa.errors import SpanqaError, first_line, redact_url


class CatalogError(SpanqaError):
    """The catalog database cannot be opened or used."""


class CatalogUnavailableError(CatalogError):
    """The catalog database failed under a running command (gone away, disk full, locked too long): worth
    retrying once it is back; what was committed before stands."""


def report_unavailable(engine: Engine) -> None:
    """Make a database failure of ``engine`` (SQLAlchemy's OperationalError: a lost connection, a full disk)
    raise a one-line :class:`CatalogUnavailableError` that names the catalog, its password masked."""

    def translate(context: Any) -> None:
        if context.is_pre_ping:
            return  # a pooled connection found dead before use: the pool reconnects, nothing failed
        exc = context.sqlalchemy_exception
        if isinstance(exc, OperationalError):
            where = display_url(engine.url)
            raise CatalogUnavailableError(f"the catalog at {where} failed: {first_line(exc, 240)}") from exc

    event.listen(engine, "handle_error", translate)


def make_engine(url: str) -> Engine:
    """An engine for the catalog at ``url``; a SQLite file gets its folder, WAL and a busy timeout.

    A bare ``postgresql://`` (or ``postgres://``) URL uses psycopg 3, the driver spanqa installs.
    """
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            url = "postgresql+psycopg://" + url[len(bare) :]
    is_sqlite = url.startswith("sqlite")
    if is_sqlite:
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=not is_sqlite)
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # The busy timeout waits out a writer instead of failing (set first: switching to WAL takes a lock);
    # WAL lets readers and one writer work at once.
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def lock_key(name: str) -> int:
    """A PostgreSQL advisory lock key for ``name`` (the same in every process)."""
    return zlib.crc32(f"spanqa:{name}".encode())


def display_url(url: str | URL) -> str:
    """A catalog URL (string or SQLAlchemy URL) safe to print: no password."""
    # str(URL) already hides the password; redact_url drops query arguments, which may carry one too.
    return redact_url(str(url))
