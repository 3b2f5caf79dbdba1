"""Schema migrations of the catalog: Alembic, configured in code (no ``alembic.ini``).

The revisions live in ``versions/`` next to this file and ship with the package.
:class:`ingest.catalog.Catalog` calls :func:`upgrade` when it opens a database, so a fresh one gets the
schema, an older one is migrated, one made by ``create_all`` before migrations existed is adopted, and one
with a revision this code does not know (written by a newer spanqa) is refused with
:class:`SchemaTooNewError`.

Two processes opening the same database at once take turns: the migration runs in one transaction that first
takes a lock (``pg_advisory_xact_lock`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and then looks at the
revision again, so the second one finds the work done.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, select, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql import func

from spanqa.errors import first_line
from spanqa.ingest.db import CatalogError, display_url, lock_key, make_engine

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

# Alembic costs about 0.15 s to import: a catalog at the newest revision (the usual case, on every command)
# is recognized with one query and the revision files' names, and alembic is imported only to migrate.

__all__ = [
    "BASELINE_REVISION",
    "CATALOG_TABLES",
    "SCRIPT_LOCATION",
    "SchemaTooNewError",
    "alembic_config",
    "current_revision",
    "head_revision",
    "upgrade",
]

SCRIPT_LOCATION = Path(__file__).resolve().parent
BASELINE_REVISION = "0001"
"""The revision whose schema ``create_all`` made before migrations existed."""
CATALOG_TABLES = frozenset({"documents", "chunks", "index_versions", "jobs", "watched_folders"})


class SchemaTooNewError(CatalogError):
    """The database was migrated by a newer spanqa: this one does not know its schema revision."""


def alembic_config(url: str | None = None, *, connection: Connection | None = None) -> Config:
    """An Alembic config for the catalog's revisions (for ``alembic.command`` functions).

    Args:
        url: the database, when no ``connection`` is given (a developer autogenerating a revision).
        connection: run on this connection, inside its transaction.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # configparser interpolation
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


@functools.cache
def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in _scripts().walk_revisions())


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = _scripts().get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise CatalogError(f"no catalog migrations found in {SCRIPT_LOCATION}")
    return head


def current_revision(engine: Engine | Connection) -> str | None:
    """The schema revision of the database (None when it has never been migrated)."""
    if isinstance(engine, Connection):
        return _revision_of(engine)
    with engine.connect() as connection:
        return _revision_of(connection)


def _revision_of(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def file_head_revision() -> str:
    """The newest revision by the revision files' names (``0003_...py`` holds revision ``0003``): what
    ``head_revision`` says, without importing alembic (a test keeps the two equal)."""
    names = sorted(path.name.split("_", 1)[0] for path in (SCRIPT_LOCATION / "versions").glob("[0-9]*_*.py"))
    if not names:  # pragma: no cover - the package always ships revisions
        raise CatalogError(f"no catalog migrations found in {SCRIPT_LOCATION}")
    return names[-1]


def _stamped_revision(connection: Connection) -> str | None:
    """The revision in the version table with one query; None when there is no such table or row."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


LOCKED_RETRIES = 20


def _alembic_errors() -> tuple[type[Exception], ...]:
    from alembic.util import CommandError

    return (CommandError,)


def upgrade(engine_or_url: Engine | str | URL, revision: str = "head") -> None:
    """Migrate the catalog to ``revision`` (the newest by default); nothing to do is cheap.

    Raises:
        SchemaTooNewError: the database has a revision this code does not know.
        CatalogError: the database cannot be reached or migrated.
    """
    if isinstance(engine_or_url, Engine):
        engine = engine_or_url
    else:
        url = (
            engine_or_url.render_as_string(hide_password=False)
            if isinstance(engine_or_url, URL)
            else engine_or_url
        )
        try:
            engine = make_engine(url)
        except (SQLAlchemyError, OSError, ImportError) as exc:
            raise CatalogError(
                f"cannot open the catalog at {display_url(engine_or_url)}: {first_line(exc)}"
            ) from exc
    try:
        for attempt in range(LOCKED_RETRIES):
            try:
                _upgrade(engine, revision)
                return
            except (SQLAlchemyError, CatalogError) as exc:
                # A fresh SQLite file switching to WAL while another process migrates it can report "locked"
                # without waiting out the busy timeout; the other process finishes soon, so try again.
                locked = "database is locked" in str(exc) and engine.dialect.name == "sqlite"
                if not locked or attempt + 1 == LOCKED_RETRIES:
                    raise
                time.sleep(0.1 * (attempt + 1))
    except CatalogError:
        raise
    except Exception as exc:
        if not isinstance(exc, (SQLAlchemyError, OSError, *_alembic_errors())):
            raise
        raise CatalogError(
            f"cannot open the catalog at {display_url(engine.url)}: {first_line(exc)}"
        ) from exc
    finally:
        if engine is not engine_or_url:
            engine.dispose()


def _upgrade(engine: Engine, revision: str) -> None:
    with engine.connect() as connection:
        if revision == "head" and _stamped_revision(connection) == file_head_revision():
            connection.rollback()
            return  # the usual case: one small query, no lock, no alembic
        from alembic import command
        from alembic.util import CommandError

        head = head_revision()
        current = _revision_of(connection)
        connection.rollback()
        _check_known(current, engine)
        if current == head and revision in ("head", head):
            return
        try:
            with connection.begin():
                _lock(connection)
                # Look again under the lock: another process may have migrated meanwhile.
                current = _revision_of(connection)
                _check_known(current, engine)
                if current is None:
                    _adopt(connection, engine)
                command.upgrade(alembic_config(connection=connection), revision)
        except CatalogError:
            raise
        except (SQLAlchemyError, CommandError) as exc:
            raise CatalogError(
                f"cannot migrate the catalog at {display_url(engine.url)} from schema revision "
                f"{current or 'none'} to {revision}: {first_line(exc)}"
            ) from exc


def _lock(connection: Connection) -> None:
    """Let one migration at a time through, until the transaction ends."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(lock_key("migrations"))))
    elif dialect == "sqlite":
        # pysqlite leaves DDL outside transactions; this makes the migration one transaction that holds the
        # write lock (waiting out other writers for the busy timeout).
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _adopt(connection: Connection, engine: Engine) -> None:
    """Stamp a catalog that ``create_all`` made (all tables, no version table) at the baseline revision."""
    present = CATALOG_TABLES & set(inspect(connection).get_table_names())
    if not present:
        return
    if present != CATALOG_TABLES:
        missing = ", ".join(sorted(CATALOG_TABLES - present))
        raise CatalogError(
            f"the database at {display_url(engine.url)} has some catalog tables but not {missing}, and no "
            "schema revision: not a spanqa catalog (or a damaged one); point SPANQA_DATABASE_URL elsewhere"
        )
    from alembic.runtime.migration import MigrationContext

    MigrationContext.configure(connection).stamp(_scripts(), BASELINE_REVISION)


def _check_known(current: str | None, engine: Engine) -> None:
    if current is not None and current not in _known_revisions():
        raise SchemaTooNewError(
            f"the catalog at {display_url(engine.url)} has schema revision {current}, "
            f"newer than this spanqa knows ({head_revision()}): upgrade spanqa"
        )
