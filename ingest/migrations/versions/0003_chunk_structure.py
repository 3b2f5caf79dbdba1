"""Chunks that follow the document's structure: each chunk's heading path, blocks and entry title.

Chunks made before this revision have neither; their documents' sha256 is cleared so that the next ingest
of their folder cuts them again along their structure (and gives their points lexical vectors). Until then
they are answered as before.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _columns(table: str) -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    existing = _columns("chunks")
    with op.batch_alter_table("chunks") as batch:
        if "heading" not in existing:
            batch.add_column(sa.Column("heading", sa.Text(), nullable=False, server_default=""))
        if "segments" not in existing:
            batch.add_column(sa.Column("segments", sa.JSON(), nullable=True))
        if "title" not in existing:
            batch.add_column(sa.Column("title", sa.Text(), nullable=False, server_default=""))
        if "title_start" not in existing:
            batch.add_column(sa.Column("title_start", sa.Integer(), nullable=True))
    if "heading" not in existing:
        op.execute("UPDATE documents SET sha256 = '' WHERE status = 'indexed'")


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("title_start")
        batch.drop_column("title")
        batch.drop_column("segments")
        batch.drop_column("heading")
