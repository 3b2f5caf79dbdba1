"""Documents remember the printed label of each page ("xii", "42") where the file declares or shows one.

``documents.page_labels`` lists one label per page (null where none is known), beside ``page_starts``.
Documents indexed before this revision have none: their pages are shown by their physical numbers until
their files are cut again (a PDF is, at its next ingest: its loader's version changed).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "page_labels" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("documents")}:
        with op.batch_alter_table("documents") as batch:
            batch.add_column(sa.Column("page_labels", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("page_labels")
