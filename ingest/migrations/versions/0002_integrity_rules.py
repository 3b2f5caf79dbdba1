"""Integrity rules: one chunk per (document, ordinal); at most one active index version.

Both are unique indexes (SQLite adds them without copying a table). Rows that break a rule, which only racing
writers of older versions could leave, are repaired first: duplicate chunks are dropped (the smallest id is
kept, and the document's sha256 is cleared so the next ingest re-indexes it; the dropped chunks' vector points
become orphans, which ingest removes), and of several active index versions all but the newest are retired.

An index that already exists (a database made by ``create_all`` from these models, then adopted) is kept.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ONE_ACTIVE = "status = 'active'"


def _has_index(table: str, name: str) -> bool:
    return any(index["name"] == name for index in sa.inspect(op.get_bind()).get_indexes(table))


def upgrade() -> None:
    if not _has_index("chunks", "uq_chunks_document_ordinal"):
        duplicates = (
            "SELECT later.id FROM chunks later JOIN chunks earlier"
            " ON earlier.document_id = later.document_id AND earlier.ordinal = later.ordinal"
            " AND earlier.id < later.id"
        )
        op.execute(
            "UPDATE documents SET sha256 = '' WHERE id IN"
            f" (SELECT document_id FROM chunks WHERE id IN ({duplicates}))"
        )
        op.execute(f"DELETE FROM chunks WHERE id IN ({duplicates})")
        op.create_index("uq_chunks_document_ordinal", "chunks", ["document_id", "ordinal"], unique=True)

    dialect = op.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite") and not _has_index(
        "index_versions", "uq_index_versions_one_active"
    ):
        op.execute(
            "UPDATE index_versions SET status = 'retired' WHERE status = 'active' AND id <"
            " (SELECT max(id) FROM index_versions WHERE status = 'active')"
        )
        op.create_index(
            "uq_index_versions_one_active",
            "index_versions",
            ["status"],
            unique=True,
            postgresql_where=sa.text(ONE_ACTIVE),
            sqlite_where=sa.text(ONE_ACTIVE),
        )


def downgrade() -> None:
    if _has_index("index_versions", "uq_index_versions_one_active"):
        op.drop_index("uq_index_versions_one_active", table_name="index_versions")
    op.drop_index("uq_chunks_document_ordinal", table_name="chunks")
