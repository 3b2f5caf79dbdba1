"""Exporting transformer models to ONNX once, and opening them on ONNX Runtime.

Both stages run on ONNX Runtime by default: as fast as eager torch per token on CPU, and a command that
only encodes or reads never imports torch. Exports are cached under the model cache and named by a
fingerprint of the weights, so a changed model is never served from a stale export.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ONNX_OPSET = 17
# Part of every export's fingerprint: a change to how models are exported makes new exports, never a mix.
# 2: models are traced with eager attention, whose graph ONNX Runtime fuses into its Attention kernel (the
# SDPA graph of recipe 1 was left unfused): reading 10 passages took 14-16% less time (docs/benchmarks.md).
EXPORT_RECIPE = 2
# The attention implementation models are loaded with before tracing (see EXPORT_RECIPE).
EXPORT_ATTENTION = "eager"


def fingerprint(folder: Path) -> str:
    """Changes when the weights or config change, so a stale export is never used."""
    digest = hashlib.sha256(f"recipe {EXPORT_RECIPE}".encode())
    for name in sorted(os.listdir(folder)):
        path = folder / name
        if path.is_file() and (name.endswith((".safetensors", ".bin", ".json")) or name == "vocab.txt"):
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def cached_export_path(cache_dir: Path, folder: Path, kind: str) -> Path:
    """Where the export of ``folder`` as ``kind`` (e.g. "encoder", "reader") is kept."""
    suffix = "" if kind == "encoder" else f"-{kind}"
    return cache_dir / f"{folder.name}{suffix}-{fingerprint(folder)}.onnx"


def load_for_export(auto_class: Any, folder: Path) -> Any:
    """``auto_class.from_pretrained(folder)`` as every export traces it: fp32, recipe attention, eval mode."""
    import torch

    return auto_class.from_pretrained(
        str(folder), dtype=torch.float32, attn_implementation=EXPORT_ATTENTION
    ).eval()


def export_module(
    model: Any,
    forward: Callable[..., Any],
    sample: Mapping[str, Any],
    *,
    output_names: Sequence[str],
    destination: Path,
) -> Path:
    """Trace ``forward(model, **inputs)`` on ``sample`` (torch tensors) into ``destination``, atomically.

    Args:
        model: the ``torch.nn.Module`` whose weights the graph holds.
        forward: ``forward(model, **inputs)`` returns one tensor or a tuple.
        sample: named input tensors; batch and token axes are exported as dynamic.
        output_names: names of the returned tensors, in order.
        destination: the ``.onnx`` file to write.

    Returns:
        ``destination``.
    """
    import torch

    names = list(sample)

    class Positional(torch.nn.Module):
        # The tracer passes inputs by position; the models take them by name. The model is a submodule so
        # that its weights become graph initializers, not captured constants.
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *inputs: Any) -> Any:
            return forward(self.inner, **dict(zip(names, inputs, strict=True)))

    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, *output_names]}
    with published(destination) as partial, torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about Python control flow: harmless for export
        torch.onnx.export(
            Positional(),
            tuple(sample[n] for n in names),
            str(partial),
            input_names=names,
            output_names=list(output_names),
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    return destination


@contextlib.contextmanager
def published(destination: Path) -> Iterator[Path]:
    """A partial file of its own to write (two processes or threads exporting at once each finish theirs),
    renamed onto ``destination`` in one step when the block succeeds, and removed when it fails."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f"{destination.name}.", suffix=".partial", dir=destination.parent)
    os.close(handle)
    partial = Path(name)
    try:
        yield partial
        partial.replace(destination)
    finally:
        partial.unlink(missing_ok=True)


def quantize_int8(source: Path, destination: Path) -> Path:
    """Dynamic int8 quantization of an exported model, published at ``destination``.

    Weights are int8 with one scale per output channel, activations are quantized per batch. One scale per
    weight tensor (the per-tensor default) cost an earlier shipped reader 4.1 F1 on SQuAD dev; per channel it
    costs 0.2-0.4 F1 at the same speed (docs/benchmarks.md).
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantizer logs advice about image models through logging.warning(), which would also give the root
    # logger a stderr handler for good: a null handler and a raised level keep both away from the user.
    root = logging.getLogger()
    quiet, level = logging.NullHandler(), root.level
    root.addHandler(quiet)
    root.setLevel(logging.ERROR)
    try:
        with published(destination) as partial:
            quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeHandler(quiet)
        root.setLevel(level)
    return destination


def int8_path(onnx_file: Path) -> Path:
    """Where an export's int8 copy is cached ("pc": per channel; an older per-tensor copy is not reused)."""
    return onnx_file.with_name(onnx_file.stem + "-int8pc.onnx")


def open_session(onnx_file: Path, *, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session with all graph optimizations; ``threads`` 0 keeps its default."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads > 0:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3
    # Idle pool threads spin by default. The encoder's and the reader's sessions (and Qdrant's threads) share
    # two cores, so spinning threads of one starve the other: without it an ask took 357 ms instead of 422.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
