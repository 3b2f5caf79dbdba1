"""The bi-encoder on ONNX Runtime: the same vectors as the torch encoder, without importing torch.

A question from the terminal pays for imports and per-call overhead, not for FLOPs: importing torch and
sentence-transformers costs seconds and a torch forward pass on a 10-token query about 20 ms, where ONNX
Runtime starts in a quarter of a second and encodes the query in about 6 ms. The model is exported to ONNX
once (that step does need torch) and cached under the data directory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spanqa.onnx_export import (
    cached_export_path,
    export_module,
    int8_path,
    load_for_export,
    open_session,
    quantize_int8,
)
from spanqa.retriever.encoder import POOLING_MODES, EncoderLoadError, resolve_encoder_model

logger = logging.getLogger(__name__)

ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class UnsupportedForOnnx(EncoderLoadError):
    """The model cannot run on the ONNX backend (not a local folder, not mean pooling, no tokenizer.json)."""


def model_folder(name_or_path: str) -> Path:
    """The local folder of a retriever model; the ONNX backend needs one."""
    location = Path(resolve_encoder_model(name_or_path))
    if not location.is_dir():
        raise UnsupportedForOnnx(f"'{name_or_path}' is not a local model folder")
    return location


def own_pooling(folder: Path) -> str | None:
    """The pooling a model folder asks for ("mean", "cls", "max", ...), or None when its vectors are more
    than pooled token vectors (e.g. a Dense layer after pooling) or it combines several modes.

    Plain HF encoders pool by mean, as sentence-transformers gives them. Both ways a Pooling config is
    written are read: ``{"pooling_mode": "mean"}`` (sentence-transformers 6) and the older flags.
    """
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return "mean"
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if any(k not in {"Transformer", "Pooling", "Normalize"} for k in kinds):
        return None
    for module in modules:
        if module.get("type", "").endswith("Pooling"):
            config = json.loads((folder / module["path"] / "config.json").read_text(encoding="utf-8"))
            mode = config.get("pooling_mode")
            if mode is None:
                flags = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
                names = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
                names["pooling_mode_max_tokens"] = "max"
                mode = names.get(flags[0], flags[0]) if len(flags) == 1 else None
            return mode if isinstance(mode, str) else None
    return "mean"


def export_onnx(folder: Path, destination: Path) -> Path:
    """Export the transformer of ``folder`` (token embeddings out) to ONNX at ``destination``."""
    from transformers import AutoModel, AutoTokenizer

    model = load_for_export(AutoModel, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    sample = tokenizer(["an example sentence", "another one"], return_tensors="pt", padding=True)
    inputs = {n: sample[n] for n in ONNX_INPUTS if n in sample}
    return export_module(
        model,
        lambda inner, **named: inner(**named).last_hidden_state,
        inputs,
        output_names=["token_embeddings"],
        destination=destination,
    )


class OnnxEncoder:
    """Sentence-BERT encoding (mean pooling, L2 normalization) on ONNX Runtime.

    Args:
        model: a local model folder, or a name the packaged MiniLM answers to.
        cache_dir: where the ONNX export is kept.
        batch_size: texts per session run (texts are sorted by length first).
        max_seq_length: cut texts after this many tokens.
        threads: ONNX Runtime intra-op threads (0: its default).
        pooling: "auto" (the model's own) or a mode of ``POOLING_MODES``.
        precision: "fp32" (the model's own vectors) or "int8" (dynamic quantization, weights per channel:
            about twice as fast on CPUs with int8 dot products, vectors within a cosine of about 0.99).
    """

    def __init__(
        self,
        *,
        model: str,
        cache_dir: str | Path,
        batch_size: int = 64,
        max_seq_length: int = 256,
        threads: int = 0,
        pooling: str = "auto",
        precision: str = "fp32",
    ) -> None:
        self._name = model
        self.precision = precision
        self._pooling = pooling
        self._mode = "mean"  # the pooling applied: the setting's, or the model's own for "auto"
        self.cache_dir = Path(cache_dir)
        self.batch_size = batch_size
        self._max_seq_length = max_seq_length
        self.threads = threads
        self._session: Any = None
        self._fast_tokenizer: Any = None
        self._hf_tokenizer: Any = None
        self._folder: Path | None = None
        self._input_names: list[str] = []
        self._dimension = 0

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def pooling(self) -> str:
        return self._pooling

    def warm_up(self) -> None:
        """Export the model once if needed, then open the ONNX Runtime session."""
        if self._session is not None:
            return
        folder = model_folder(self._name)
        own = own_pooling(folder)
        # Pooling happens here, in numpy: a model whose vectors are pooled token vectors runs with any of
        # the modes this encoder pools by; "auto" keeps the model's own.
        if own is None or (self._pooling == "auto" and own not in POOLING_MODES):
            raise UnsupportedForOnnx(f"'{self._name}' does more than pool its token vectors ({own})")
        self._mode = own if self._pooling == "auto" else self._pooling
        if not (folder / "tokenizer.json").is_file():
            raise UnsupportedForOnnx(f"'{self._name}' has no tokenizer.json")
        from tokenizers import Tokenizer

        onnx_file = cached_export_path(self.cache_dir, folder, "encoder")
        if not onnx_file.is_file():
            logger.info("exporting %s to ONNX (once) at %s", folder, onnx_file)
            export_onnx(folder, onnx_file)
        if self.precision == "int8":
            quantized = int8_path(onnx_file)
            if not quantized.is_file():
                logger.info("quantizing the encoder to int8 (once) at %s", quantized)
                quantize_int8(onnx_file, quantized)
            onnx_file = quantized
        elif self.precision != "fp32":
            raise ValueError(f"encoder precision must be fp32 or int8, not {self.precision!r}")
        session = open_session(onnx_file, threads=self.threads)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(self._model_max_length(folder))
        tokenizer.no_padding()
        self._input_names = [i.name for i in session.get_inputs()]
        self._dimension = int(session.get_outputs()[0].shape[-1])
        self._fast_tokenizer, self._session, self._folder = tokenizer, session, folder

    def _model_max_length(self, folder: Path) -> int:
        limit = self._max_seq_length
        config_file = folder / "sentence_bert_config.json"
        if config_file.is_file():
            limit = min(
                limit, int(json.loads(config_file.read_text(encoding="utf-8")).get("max_seq_length", limit))
            )
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return min(limit, int(config.get("max_position_embeddings", limit)))

    @property
    def dimension(self) -> int:
        self.warm_up()
        return self._dimension

    @property
    def max_seq_length(self) -> int:
        self.warm_up()
        assert self._folder is not None
        return self._model_max_length(self._folder)

    @property
    def tokenizer(self) -> Any:
        """The HF tokenizer (for chunking by the same tokens the model sees); loaded only when asked for."""
        if self._hf_tokenizer is None:
            self.warm_up()
            from transformers import AutoTokenizer

            self._hf_tokenizer = AutoTokenizer.from_pretrained(str(self._folder))
        return self._hf_tokenizer

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 rows of unit length, in the order given."""
        self.warm_up()
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._fast_tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            arrays = {name: np.zeros((len(batch), width), dtype=np.int64) for name in ONNX_INPUTS}
            for row, i in enumerate(batch):
                enc = encodings[i]
                n = len(enc.ids)
                arrays["input_ids"][row, :n] = enc.ids
                arrays["attention_mask"][row, :n] = enc.attention_mask
                arrays["token_type_ids"][row, :n] = enc.type_ids
            feed = {name: arrays[name] for name in self._input_names}
            hidden = self._session.run(None, feed)[0]
            pooled = pool(hidden, arrays["attention_mask"], self._mode)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled / np.clip(norms, 1e-12, None)
        return out


def pool(hidden: np.ndarray, attention_mask: np.ndarray, mode: str) -> np.ndarray:
    """Token vectors (batch, tokens, dim) to one vector per row, as sentence-transformers pools them.

    Args:
        hidden: the encoder's last hidden states.
        attention_mask: 1 for real tokens, 0 for padding.
        mode: "mean" (of the real tokens), "cls" (the first token) or "max" (per dimension, real tokens).
    """
    mask = attention_mask[..., None].astype(np.float32)
    if mode == "cls":
        return np.asarray(hidden[:, 0], dtype=np.float32)
    if mode == "max":
        return np.asarray(np.where(mask > 0, hidden, -1e9).max(axis=1), dtype=np.float32)
    return np.asarray((hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None), dtype=np.float32)
