"""Documents remember how they were cut; HTML terms of several lines in one ``<dt>`` name one entry.

``documents.chunking`` records the chunker's version and the chunk sizes a document was cut with: a change
of ``chunk_tokens`` or ``chunk_overlap``, or a new chunker, cuts the file again at its next ingest instead of
leaving passages of two cuts side by side. Documents indexed before this revision have none (they count as
cut the current way).

Before this revision the second line of a ``<dt>`` ("-a<br>--data-only", as PostgreSQL's manual writes
options) was taken for a term inside the first one's entry, so the entry's description lost its names (they
stood alone in a passage of their own). HTML documents indexed before it have their sha256 cleared so that
the next ingest of their folders cuts them again.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "chunking" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("documents")}:
        with op.batch_alter_table("documents") as batch:
            batch.add_column(sa.Column("chunking", sa.String(64), nullable=True))
    op.execute("UPDATE documents SET sha256 = '' WHERE status = 'indexed' AND format = 'html'")


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("chunking")
