"""The extractive reader component: question + passages -> scored spans of those passages."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reader.decoding import SpanCandidate, WindowLogits, decode
from reader.model import load_reader_model, make_windows, run_windows

if TYPE_CHECKING:
    from spanqa.settings import Settings

logger = logging.getLogger(__name__)


@dataclass
class ReaderResult:
    """What the reader found for one question.

    Attributes:
        spans: the best spans, best first (score = start + end logits).
        null_score: the best "no answer" evidence: the lowest null score over all windows.
        windows: how many model windows were read.
    """

    spans: list[SpanCandidate] = field(default_factory=list)
    null_score: float = float("inf")
    windows: int = 0

    def abstains(self, threshold: float = 0.0) -> bool:
        """True when no span beats "no answer" by more than ``threshold`` logits."""
        return not self.spans or max(s.margin for s in self.spans) <= threshold


class ExtractiveReader:
    """Reads passages in overlapping windows and decodes answer spans from start/end logits.

    Args:
        model: a model-hub name, a local path, or a shipped model's name.
        max_seq_len: tokens per window.
        doc_stride: tokens shared by consecutive windows.
        max_question_tokens: longer questions are cut.
        max_answer_tokens: the longest answer span.
        batch_size: windows per forward pass.
        top_k: spans returned per question.
        device: a torch device name.
    """

    def __init__(
        self,
        *,
        model: str,
        max_seq_len: int = 384,
        doc_stride: int = 128,
        max_question_tokens: int = 64,
        max_answer_tokens: int = 30,
        batch_size: int = 16,
        top_k: int = 5,
        device: str = "cpu",
    ) -> None:
        self.model_name = model
        self.max_seq_len = max_seq_len
        self.doc_stride = doc_stride
        self.max_question_tokens = max_question_tokens
        self.max_answer_tokens = max_answer_tokens
        self.batch_size = batch_size
        self.top_k = top_k
        self.device = device
        self._model: Any = None
        self._tokenizer: Any = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ExtractiveReader:
        return cls(
            model=settings.reader_model,
            max_seq_len=settings.max_seq_len,
            doc_stride=settings.doc_stride,
            max_question_tokens=settings.max_question_tokens,
            max_answer_tokens=settings.max_answer_tokens,
            batch_size=settings.reader_batch_size,
            top_k=max(settings.answers * 4, 10),
            device=settings.device,
        )

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, **kwargs: Any) -> ExtractiveReader:
        """Wrap an already loaded model (training evaluates the model it is training)."""
        reader = cls(model=getattr(model, "name_or_path", "<in memory>"), **kwargs)
        reader._model, reader._tokenizer = model, tokenizer
        return reader

    def warm_up(self) -> None:
        """Load the model and tokenizer (once)."""
        if self._model is None:
            self._model, self._tokenizer = load_reader_model(self.model_name, device=self.device)

    @property
    def tokenizer(self) -> Any:
        self.warm_up()
        return self._tokenizer

    def run(self, question: str, passages: Sequence[str]) -> ReaderResult:
        """Read ``passages`` for ``question``.

        Returns:
            The best spans over all passages and windows, with the no-answer evidence.
        """
        return self.run_batch([(question, passages)])[0]

    def run_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[ReaderResult]:
        """Read many (question, passages) pairs, batching windows across them."""
        self.warm_up()
        windows = []
        for index, (question, passages) in enumerate(items):
            windows.extend(
                make_windows(
                    self._tokenizer,
                    question,
                    list(passages),
                    item_index=index,
                    max_seq_len=self.max_seq_len,
                    doc_stride=self.doc_stride,
                    max_question_tokens=self.max_question_tokens,
                )
            )
        logits = run_windows(self._model, self._tokenizer, windows, batch_size=self.batch_size)
        per_item: list[list[WindowLogits]] = [[] for _ in items]
        for window, (starts, ends) in zip(windows, logits, strict=True):
            per_item[window.item_index].append(
                WindowLogits(
                    passage_index=window.passage_index,
                    start_logits=starts,
                    end_logits=ends,
                    offsets=window.offsets,
                    null_index=window.null_index,
                )
            )
        results = []
        for (_, passages), item_windows in zip(items, per_item, strict=True):
            spans = decode(
                item_windows, list(passages), max_answer_tokens=self.max_answer_tokens, top_k=self.top_k
            )
            null = min((w.null_score for w in item_windows), default=float("inf"))
            results.append(ReaderResult(spans=spans, null_score=null, windows=len(item_windows)))
        return results
