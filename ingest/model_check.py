"""The check that one collection never mixes vectors of two models (or two poolings of one), at ingest and at
query time."""

from __future__ import annotations

from spanqa.errors import SpanqaError
from spanqa.types import IndexVersion


class ModelMismatchError(SpanqaError):
    """The configured retriever model or pooling is not the one the index was built with."""


def check_model(active: IndexVersion, configured: str, pooling: str) -> None:
    """Refuse to mix vectors of two models (or two poolings of one) in one collection."""
    if active.model_name != configured:
        raise ModelMismatchError(
            f"the index was built with retriever model '{active.model_name}' but SPANQA_RETRIEVER_MODEL is "
            f"'{configured}': set it back, or rebuild the index for the new model with "
            f"`spanqa reindex --retriever-model {configured}`"
        )
    if active.pooling != pooling:
        raise ModelMismatchError(
            f"the index was built with pooling '{active.pooling}' but SPANQA_POOLING is '{pooling}': set it "
            "back, or rebuild the index with `spanqa reindex`"
        )
