"""The span model on ONNX Runtime: the same start/end logits as torch, without importing torch.

Per window it is as fast as eager torch on this CPU (both are compute-bound fp32 GEMMs); what it saves is
start-up: a one-shot `spanqa ask` no longer imports torch (about 2 s, more on a loaded machine). The
export needs torch once; it is cached under the model cache and checked against torch before it is used.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from spanqa.errors import SpanqaError
from spanqa.onnx_export import (
    cached_export_path,
    export_module,
    int8_path,
    load_for_export,
    open_session,
    quantize_int8,
)
from spanqa.reader.tokenization import SpanTokenizer

logger = logging.getLogger(__name__)

SPAN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_PRECISIONS = ("fp32", "int8")  # the settings word "auto" is resolved by the reader
# An export whose logits differ more than this from torch's is not used (fp32 kernels differ ~1e-5).
EXPORT_TOLERANCE = 1e-3


class OnnxExportMismatch(SpanqaError):
    """The exported span model does not reproduce the torch model's logits."""


class OnnxSpanModel:
    """An exported ``AutoModelForQuestionAnswering`` behind an ONNX Runtime session.

    Args:
        session: an ``onnxruntime.InferenceSession`` with outputs (start_logits, end_logits).
        name_or_path: the model it was exported from.
    """

    def __init__(self, session: Any, *, name_or_path: str) -> None:
        self.session = session
        self.name_or_path = name_or_path
        self.input_names = [i.name for i in session.get_inputs()]

    def logits(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for a padded batch of int64 arrays (extra inputs are ignored)."""
        feed = {name: inputs[name] for name in self.input_names}
        starts, ends = self.session.run(["start_logits", "end_logits"], feed)
        return np.asarray(starts, dtype=np.float32), np.asarray(ends, dtype=np.float32)


def export_span_model(folder: Path, destination: Path) -> Path:
    """Export the span model in ``folder`` to ``destination`` and check its logits against torch.

    Raises:
        OnnxExportMismatch: the export does not reproduce torch's logits (it is deleted).
    """
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    model = load_for_export(AutoModelForQuestionAnswering, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    sample = tokenizer(
        ["Who won?", "Where was the game played this year?"],
        ["The Denver Broncos won the game.", "It was played at Levi's Stadium in Santa Clara, California."],
        return_tensors="pt",
        padding=True,
    )
    inputs = {n: sample[n] for n in SPAN_INPUTS if n in sample}

    def span_logits(inner: Any, **named: Any) -> tuple[Any, Any]:
        out = inner(**named)
        return out.start_logits, out.end_logits

    check = tokenizer(
        ["What is checked?"] * 3,
        ["A short passage.", "A longer passage than the traced one " * 8, "Mixed lengths pad the batch."],
        return_tensors="pt",
        padding=True,
    )
    check_inputs = {n: check[n] for n in SPAN_INPUTS if n in check}
    # Before the export: after tracing, the torch model no longer gives its own logits.
    with torch.inference_mode():
        expected = span_logits(model, **check_inputs)
    export_module(
        model, span_logits, inputs, output_names=["start_logits", "end_logits"], destination=destination
    )
    got = OnnxSpanModel(open_session(destination), name_or_path=str(folder)).logits(
        {n: t.numpy() for n, t in check_inputs.items()}
    )
    mask = check_inputs["attention_mask"].numpy().astype(bool)
    worst = max(float(np.abs(e.numpy() - g)[mask].max()) for e, g in zip(expected, got, strict=True))
    if worst > EXPORT_TOLERANCE:
        destination.unlink(missing_ok=True)
        raise OnnxExportMismatch(f"ONNX export of {folder} differs from torch by {worst:.2g} logits")
    return destination


def load_onnx_reader(
    folder: Path, *, cache_dir: Path, threads: int = 0, precision: str = "fp32"
) -> tuple[OnnxSpanModel, SpanTokenizer]:
    """The span model of a local ``folder`` on ONNX Runtime (exported on first use) and its tokenizer.

    Args:
        folder: a local ``AutoModelForQuestionAnswering`` folder.
        cache_dir: where exports are kept.
        threads: ONNX Runtime intra-op threads (0: its default).
        precision: "fp32" (the model's own logits) or "int8" (dynamic quantization, weights per channel:
            faster, slightly different logits; see docs/benchmarks.md).
    """
    if precision not in ONNX_PRECISIONS:
        raise ValueError(f"ONNX precision must be one of {', '.join(ONNX_PRECISIONS)}, not {precision!r}")
    onnx_file = cached_export_path(cache_dir, folder, "reader")
    if not onnx_file.is_file():
        logger.info("exporting the reader %s to ONNX (once) at %s", folder, onnx_file)
        export_span_model(folder, onnx_file)
    if precision == "int8":
        quantized = int8_path(onnx_file)
        if not quantized.is_file():
            logger.info("quantizing the reader to int8 (once) at %s", quantized)
            quantize_int8(onnx_file, quantized)
        onnx_file = quantized
    model = OnnxSpanModel(open_session(onnx_file, threads=threads), name_or_path=str(folder))
    token_types = "token_type_ids" in model.input_names
    if (folder / "tokenizer.json").is_file():
        # The tokenizers library alone: importing transformers would cost a question about a second.
        return model, SpanTokenizer.from_folder(folder, token_types=token_types)
    from transformers import AutoTokenizer

    tokenizer = SpanTokenizer.from_transformers(AutoTokenizer.from_pretrained(str(folder)))
    return model, replace(tokenizer, token_types=token_types)
