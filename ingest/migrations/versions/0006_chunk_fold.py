"""Each chunk may name the near-duplicate group it was folded into at ingest (``fold_similarity``).

Chunks indexed before this revision start their own group: a new near-duplicate of one of them still folds
into it (the group is the chunk's id), and they fold among themselves once their files are indexed again.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "fold" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("chunks")}:
        with op.batch_alter_table("chunks") as batch:
            batch.add_column(sa.Column("fold", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("fold")
