"""The extractive reader component: question + passages -> scored spans of those passages."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spanqa.reader.decoding import Segments, SpanCandidate, WindowLogits, decode
from spanqa.reader.model import (
    ReaderLoadError,
    load_reader_model,
    make_windows,
    resolve_reader_model,
    run_windows,
)
from spanqa.reader.tokenization import SpanTokenizer
from spanqa.settings import CHOICES

if TYPE_CHECKING:
    from spanqa.settings import Settings

logger = logging.getLogger(__name__)

READER_BACKENDS = CHOICES["reader_backend"]
READER_PRECISIONS = CHOICES["reader_precision"]
# Windows per forward pass on a GPU; on a CPU one per pass (no padding; see auto_batch_size).
GPU_BATCH_SIZE = 32


def auto_batch_size(device: str) -> int:
    """Windows per forward pass for ``device``.

    On a CPU the matrix products of one ~200-token window already keep the cores busy, so batching buys
    nothing but padding: int8 read 10 passages in 302 and 224 ms one window per pass against 314 and 221 ms
    in batches of 4 (two paired runs, docs/benchmarks.md).
    """
    return 1 if device == "cpu" else GPU_BATCH_SIZE


@dataclass
class ReaderResult:
    """What the reader found for one question.

    Attributes:
        spans: the best spans, best first (score = start + end logits).
        null_score: the best "no answer" evidence: the lowest null score over all windows.
        windows: how many model windows were read.
        question_cut: the question was longer than ``max_question_tokens`` and only its start was read.
    """

    spans: list[SpanCandidate] = field(default_factory=list)
    null_score: float = float("inf")
    windows: int = 0
    question_cut: bool = False

    def abstains(self, threshold: float = 0.0) -> bool:
        """True when no span beats "no answer" by more than ``threshold`` logits."""
        return not self.spans or max(s.margin for s in self.spans) <= threshold


class ExtractiveReader:
    """Reads passages in overlapping windows and decodes answer spans from start/end logits.

    Args:
        model: a model-hub name, a local path, or a shipped model's name.
        max_seq_length: tokens per window.
        stride: tokens shared by consecutive windows.
        max_question_tokens: longer questions are cut.
        max_answer_tokens: the longest answer span.
        batch_size: windows per forward pass; 0 picks one for the device (see ``auto_batch_size``).
        top_k: spans returned per question.
        device: a torch device name.
        backend: "auto" (ONNX Runtime on CPU for a local model when it is installed, else torch), "onnx"
            or "torch".
        cache_dir: where the ONNX export is kept; without one the reader runs on torch.
        threads: ONNX Runtime intra-op threads (0: its default).
        precision: "auto" (int8 where the reader runs on ONNX Runtime, else fp32), "fp32", or "int8"
            (per-channel dynamic quantization on ONNX Runtime; needs the ONNX backend).
    """

    def __init__(
        self,
        *,
        model: str,
        max_seq_length: int = 384,
        stride: int = 128,
        max_question_tokens: int = 64,
        max_answer_tokens: int = 30,
        batch_size: int = 0,
        top_k: int = 5,
        device: str = "cpu",
        backend: str = "auto",
        cache_dir: str | Path | None = None,
        threads: int = 0,
        precision: str = "auto",
    ) -> None:
        if backend not in READER_BACKENDS:
            raise ValueError(f"reader backend must be one of {', '.join(READER_BACKENDS)}, not {backend!r}")
        if precision not in READER_PRECISIONS:
            raise ValueError(
                f"reader precision must be one of {', '.join(READER_PRECISIONS)}, not {precision!r}"
            )
        self.model_name = model
        self.max_seq_length = max_seq_length
        self.stride = stride
        self.max_question_tokens = max_question_tokens
        self.max_answer_tokens = max_answer_tokens
        self.batch_size = batch_size or auto_batch_size(device)
        self.top_k = top_k
        self.device = device
        self.backend = backend
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.threads = threads
        self.precision = precision
        self._model: Any = None
        self._tokenizer: SpanTokenizer | None = None
        # What warm_up loaded: "int8" or "fp32" (None before, or for a model handed to from_loaded).
        self.loaded_precision: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ExtractiveReader:
        return cls(
            model=settings.reader_model,
            max_seq_length=settings.max_seq_length,
            stride=settings.stride,
            max_question_tokens=settings.max_question_tokens,
            max_answer_tokens=settings.max_answer_tokens,
            batch_size=settings.reader_batch_size,
            top_k=max(settings.answers * 4, 10),
            device=settings.device,
            backend=settings.reader_backend,
            cache_dir=settings.model_cache,
            threads=settings.torch_threads,
            precision=settings.reader_precision,
        )

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, **kwargs: Any) -> ExtractiveReader:
        """Wrap an already loaded model (training evaluates the model it is training)."""
        reader = cls(model=getattr(model, "name_or_path", "<in memory>"), **kwargs)
        reader._model = model
        reader._tokenizer = (
            tokenizer if isinstance(tokenizer, SpanTokenizer) else SpanTokenizer.from_transformers(tokenizer)
        )
        return reader

    def warm_up(self) -> None:
        """Load the model and tokenizer (once): on ONNX Runtime where possible, else on torch."""
        if self._model is not None:
            return
        if self.backend != "torch" or self.precision == "int8":
            loaded = self._load_onnx()
            if loaded is not None:
                self._model, self._tokenizer = loaded
                self.loaded_precision = self._onnx_precision
                return
        self._model, tokenizer = load_reader_model(self.model_name, device=self.device, threads=self.threads)
        self._tokenizer = SpanTokenizer.from_transformers(tokenizer)
        self.loaded_precision = "fp32"

    @property
    def _onnx_precision(self) -> str:
        # "auto" takes int8 on ONNX Runtime: per-channel int8 reads about a quarter faster for 0.2-0.4 F1
        # (benchmarks.md).
        return "fp32" if self.precision == "fp32" else "int8"

    def _load_onnx(self) -> tuple[Any, SpanTokenizer] | None:
        """The ONNX model, or None where "auto" falls back to torch.

        Raises:
            ReaderLoadError: when ONNX Runtime is required (backend "onnx", or int8) and cannot run it.
        """
        location = Path(resolve_reader_model(self.model_name))
        strict = self.backend == "onnx" or self.precision == "int8"
        required_by = "reader_precision 'int8'" if self.precision == "int8" else "reader_backend 'onnx'"
        unusable = (
            "reader_backend is 'torch'"
            if self.backend == "torch"
            else "no cache_dir for the export"
            if self.cache_dir is None
            else f"device {self.device}"
            if self.device != "cpu"
            else "not a local model folder"
            if not location.is_dir()
            else None
        )
        if unusable is not None:
            if strict:
                raise ReaderLoadError(
                    f"{required_by} needs ONNX Runtime, which cannot run '{self.model_name}': {unusable}"
                )
            logger.info("reader on torch: %s", unusable)
            return None
        assert self.cache_dir is not None
        try:
            from spanqa.reader.onnx_model import load_onnx_reader

            return load_onnx_reader(
                location, cache_dir=self.cache_dir, threads=self.threads, precision=self._onnx_precision
            )
        except Exception as exc:  # an architecture the exporter cannot trace: torch still can
            if strict:
                raise ReaderLoadError(
                    f"{required_by}: ONNX Runtime failed for '{self.model_name}': {exc}"
                ) from exc
            logger.warning("ONNX export of reader %s failed (%s); using torch", self.model_name, exc)
            return None

    @property
    def tokenizer(self) -> SpanTokenizer:
        self.warm_up()
        assert self._tokenizer is not None
        return self._tokenizer

    def run(
        self, question: str, passages: Sequence[str], segments: Sequence[Segments | None] | None = None
    ) -> ReaderResult:
        """Read ``passages`` for ``question``.

        Args:
            question: the question.
            passages: the texts to read.
            segments: per passage, the char ranges an answer must lie inside, whole (its blocks; a heading
                put in front of a passage lies in none); None: anywhere.

        Returns:
            The best spans over all passages and windows, with the no-answer evidence.
        """
        return self.run_batch([(question, passages)], [segments])[0]

    def run_batch(
        self,
        items: Sequence[tuple[str, Sequence[str]]],
        segments: Sequence[Sequence[Segments | None] | None] | None = None,
    ) -> list[ReaderResult]:
        """Read many (question, passages) pairs, batching windows across them (``segments`` per item)."""
        tokenizer = self.tokenizer
        windows = []
        for index, (question, passages) in enumerate(items):
            windows.extend(
                make_windows(
                    tokenizer,
                    question,
                    list(passages),
                    item_index=index,
                    max_seq_length=self.max_seq_length,
                    stride=self.stride,
                    max_question_tokens=self.max_question_tokens,
                )
            )
        logits = run_windows(self._model, tokenizer, windows, batch_size=self.batch_size)
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
        for position, ((question, passages), item_windows) in enumerate(zip(items, per_item, strict=True)):
            spans = decode(
                item_windows,
                list(passages),
                max_answer_tokens=self.max_answer_tokens,
                top_k=self.top_k,
                segments=segments[position] if segments is not None else None,
            )
            null = min((w.null_score for w in item_windows), default=float("inf"))
            asked = question.strip()
            cut = tokenizer.truncate_question(asked, self.max_question_tokens) != asked
            results.append(
                ReaderResult(spans=spans, null_score=null, windows=len(item_windows), question_cut=cut)
            )
        return results
