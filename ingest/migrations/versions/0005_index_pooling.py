"""Each index version records how its vectors were pooled (the ``pooling`` setting: auto, mean, cls, max).

Versions made before this revision pooled as their model does: "auto". A change of the setting is refused
until `spanqa reindex` builds a collection with the new pooling: vectors of two poolings are never mixed.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "pooling" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("index_versions")}:
        with op.batch_alter_table("index_versions") as batch:
            batch.add_column(sa.Column("pooling", sa.String(16), nullable=False, server_default="auto"))


def downgrade() -> None:
    with op.batch_alter_table("index_versions") as batch:
        batch.drop_column("pooling")
