"""Loading a span-extraction model and running it over (question, passage) windows.

torch and transformers are imported lazily: importing them costs seconds, and the CLI should not pay
that for commands that never read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from spanqa.errors import SpanqaError, first_line
from spanqa.settings import DEFAULT_READER_MODEL

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from spanqa.reader.tokenization import SpanTokenizer


SHIPPED_MODELS_DIR = Path(__file__).resolve().parent / "models"


class ReaderLoadError(SpanqaError):
    """The reader model or its tokenizer cannot be loaded."""


def resolve_reader_model(name_or_path: str) -> str:
    """Map the configured reader to something ``from_pretrained`` can load.

    Shipped model names resolve to ``reader/models/<name>``; an existing path is used as is; anything else
    is taken for a model-hub name.
    """
    shipped = SHIPPED_MODELS_DIR / name_or_path
    if shipped.is_dir():
        return str(shipped)
    expanded = os.path.expanduser(name_or_path)
    if os.path.exists(expanded):
        return expanded
    if name_or_path == DEFAULT_READER_MODEL:
        raise ReaderLoadError(
            f"the shipped reader '{DEFAULT_READER_MODEL}' is missing from {SHIPPED_MODELS_DIR}; "
            "set SPANQA_READER_MODEL to a trained model's path or hub name"
        )
    return name_or_path


def load_reader_model(
    name_or_path: str, *, device: str = "cpu", threads: int = 0
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load an ``AutoModelForQuestionAnswering`` and its fast tokenizer, in eval mode, as float32.

    ``threads`` > 0 sets torch's intra-op threads (0: torch's default).

    Raises:
        ReaderLoadError: with a one-line reason and the setting that fixes it.
    """
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    if threads > 0:
        torch.set_num_threads(threads)
    location = resolve_reader_model(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
        model = AutoModelForQuestionAnswering.from_pretrained(location, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ReaderLoadError(
            f"cannot load reader '{name_or_path}' ({first_line(exc)}); set SPANQA_READER_MODEL to a local "
            "model directory, or a hub name with network access"
        ) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ReaderLoadError(f"reader '{name_or_path}' has no fast tokenizer; span offsets need one")
    model.eval()
    model.to(device)
    return model, tokenizer


@dataclass(frozen=True)
class Window:
    """One tokenized (question, passage) window ready for the model."""

    item_index: int
    passage_index: int
    input_ids: list[int]
    token_type_ids: list[int] | None
    offsets: list[tuple[int, int] | None]
    null_index: int


def make_windows(
    tokenizer: SpanTokenizer,
    question: str,
    passages: list[str],
    *,
    item_index: int = 0,
    max_seq_length: int = 384,
    stride: int = 128,
    max_question_tokens: int = 64,
) -> list[Window]:
    """Tokenize ``question`` against each passage in overlapping windows.

    Args:
        tokenizer: the reader's tokenizer.
        question: the question; cut at ``max_question_tokens`` tokens.
        passages: the passage texts.
        item_index: carried into each window so batches can mix questions.
        max_seq_length: tokens per window, special tokens included.
        stride: tokens shared by consecutive windows of a passage.
        max_question_tokens: the longest question in tokens.

    Returns:
        Every window of every passage; ``offsets`` are None outside the passage.
    """
    if not passages:
        return []
    question = tokenizer.truncate_question(question.strip(), max_question_tokens)
    per_passage = tokenizer.windows(question, passages, max_seq_length=max_seq_length, stride=stride)
    windows: list[Window] = []
    for passage_index, encodings in enumerate(per_passage):
        for encoding in encodings:
            ids = encoding.ids
            cls_id = tokenizer.cls_id
            windows.append(
                Window(
                    item_index=item_index,
                    passage_index=passage_index,
                    input_ids=ids,
                    token_type_ids=encoding.type_ids if tokenizer.token_types else None,
                    offsets=tokenizer.passage_offsets(encoding),
                    null_index=ids.index(cls_id) if cls_id is not None and cls_id in ids else 0,
                )
            )
    return windows


def length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (less padding), longest first."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(
    input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int] | None] | None, pad_id: int
) -> dict[str, np.ndarray]:
    """Right-pad token sequences to the longest one: int64 ``input_ids``, ``attention_mask`` (and types)."""
    width = max(len(ids) for ids in input_ids)
    ids_array = np.full((len(input_ids), width), pad_id, dtype=np.int64)
    attention = np.zeros((len(input_ids), width), dtype=np.int64)
    types = np.zeros((len(input_ids), width), dtype=np.int64)
    for row, ids in enumerate(input_ids):
        ids_array[row, : len(ids)] = ids
        attention[row, : len(ids)] = 1
        row_types = token_type_ids[row] if token_type_ids is not None else None
        if row_types is not None:
            types[row, : len(ids)] = row_types
    out = {"input_ids": ids_array, "attention_mask": attention}
    if token_type_ids is not None:
        out["token_type_ids"] = types
    return out


def span_logits(model: Any, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits of one padded batch, from a torch span model or an ``OnnxSpanModel``."""
    from spanqa.reader.onnx_model import OnnxSpanModel

    if isinstance(model, OnnxSpanModel):
        return model.logits(inputs)
    import torch

    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(**{name: torch.from_numpy(array).to(device) for name, array in inputs.items()})
    return out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()


def run_windows(
    model: Any, tokenizer: SpanTokenizer, windows: list[Window], *, batch_size: int = 16
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Start and end logits for every window, batched by length; results in ``windows`` order."""
    results: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(windows)
    pad_id = tokenizer.pad_id
    for batch in length_batches([len(w.input_ids) for w in windows], batch_size):
        inputs = pad_batch(
            [windows[i].input_ids for i in batch],
            [windows[i].token_type_ids for i in batch]
            if windows[batch[0]].token_type_ids is not None
            else None,
            pad_id,
        )
        starts, ends = span_logits(model, inputs)
        for row, i in enumerate(batch):
            n = len(windows[i].input_ids)
            results[i] = (starts[row, :n], ends[row, :n])
    return [r for r in results if r is not None]
