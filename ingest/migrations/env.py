"""Alembic environment of the catalog, run by :func:`ingest.migrations.upgrade` (no alembic.ini).

The connection comes in ``config.attributes["connection"]``, already inside the transaction that holds the
migration lock, so every revision and the version stamp commit together. Without one (a developer running
``alembic.command.revision(alembic_config(url), autogenerate=True)``) an engine is made from
``sqlalchemy.url``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, MetaData

config = context.config


def _target_metadata() -> MetaData:
    # Only autogenerate compares against the models; ingest.catalog is already imported by then.
    from spanqa.ingest.catalog import Base

    return Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=_target_metadata(),
        render_as_batch=True,  # SQLite cannot ALTER most things: batch mode copies the table
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    if context.is_offline_mode():
        context.configure(
            url=config.get_main_option("sqlalchemy.url"),
            target_metadata=_target_metadata(),
            literal_binds=True,
            render_as_batch=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from spanqa.ingest.db import make_engine

    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url in the Alembic config")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


_main()
