"""Hard-wrapped lines joined for reading: plain-text and PDF documents are read again.

The loaders now join the hard-wrapped lines of plain text and PDF pages (one space for each line break, so
offsets keep their meaning). Documents of those formats indexed before this revision have their sha256
cleared, so that the next ingest of their folder loads them again; until then they are answered as
before. The schema does not change.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE documents SET sha256 = '' WHERE status = 'indexed' AND format IN ('txt', 'pdf')")


def downgrade() -> None:
    """Nothing to undo: the text of a document read again is valid for either revision."""
