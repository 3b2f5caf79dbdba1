"""Cutting (question, passage) windows with the ``tokenizers`` library alone.

A question asked from the terminal never imports transformers (about a second of start-up): the shipped
reader's ``tokenizer.json`` is all it needs. Windows are cut as transformers cuts them for
``tokenizer(question, passage, truncation="only_second", stride=..., return_overflowing_tokens=True)``
(a test holds them equal), by copies of the backend set up once per (length, stride), so one
``SpanTokenizer`` serves concurrent questions without reconfiguring a shared tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spanqa.errors import SpanqaError

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer


class TokenizerLoadError(SpanqaError):
    """A reader's tokenizer files cannot be read without transformers."""


def _token_text(value: Any) -> str | None:
    """A special token from tokenizer_config.json: a string, or a serialized AddedToken (a dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class SpanTokenizer:
    """What span reading needs of a fast tokenizer.

    Attributes:
        backend: a ``tokenizers.Tokenizer`` with no truncation and no padding of its own.
        cls_id: the token whose logits score "no answer" (None: the first token of each window).
        pad_id: the id batches are padded with.
        pad_right: the question comes first (BERT, RoBERTa); False puts the passage first (XLNet-like).
        token_types: whether the model takes ``token_type_ids``.
    """

    backend: Tokenizer
    cls_id: int | None
    pad_id: int
    pad_right: bool = True
    token_types: bool = True
    _cutters: dict[tuple[int, int], Tokenizer] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_folder(cls, folder: Path, *, token_types: bool = True) -> SpanTokenizer:
        """Read ``tokenizer.json`` and ``tokenizer_config.json`` of a saved fast tokenizer.

        Raises:
            TokenizerLoadError: no readable tokenizer.json.
        """
        from tokenizers import Tokenizer

        try:
            backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # the Rust side raises plain Exceptions for unreadable files
            raise TokenizerLoadError(f"cannot read {folder / 'tokenizer.json'}: {exc}") from exc
        config: dict[str, Any] = {}
        # tokenizer_config.json wins over special_tokens_map.json, as in transformers.
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            path = folder / name
            if path.is_file():
                config.update(json.loads(path.read_text(encoding="utf-8")))
        return cls.over(
            backend,
            cls_token=_token_text(config.get("cls_token")),
            pad_token=_token_text(config.get("pad_token")),
            pad_right=config.get("padding_side", "right") == "right",
            token_types=token_types,
        )

    @classmethod
    def from_transformers(cls, tokenizer: Any) -> SpanTokenizer:
        """The same windows from a loaded transformers fast tokenizer (its backend is copied, not shared)."""
        from tokenizers import Tokenizer

        return cls.over(
            Tokenizer.from_str(tokenizer.backend_tokenizer.to_str()),
            cls_token=tokenizer.cls_token,
            pad_token=tokenizer.pad_token,
            pad_right=tokenizer.padding_side == "right",
            token_types="token_type_ids" in tokenizer.model_input_names,
        )

    @classmethod
    def over(
        cls,
        backend: Tokenizer,
        *,
        cls_token: str | None,
        pad_token: str | None,
        pad_right: bool = True,
        token_types: bool = True,
    ) -> SpanTokenizer:
        """Wrap ``backend``, a tokenizer no one else uses, with its truncation and padding turned off."""
        backend.no_truncation()
        backend.no_padding()
        cls_id = backend.token_to_id(cls_token) if cls_token else None
        pad_id = backend.token_to_id(pad_token) if pad_token else None
        return cls(backend, cls_id=cls_id, pad_id=pad_id or 0, pad_right=pad_right, token_types=token_types)

    def truncate_question(self, question: str, max_tokens: int) -> str:
        """Cut ``question`` after ``max_tokens`` tokens, on a token boundary."""
        offsets = self.backend.encode(question, add_special_tokens=False).offsets
        if len(offsets) <= max_tokens:
            return question
        return question[: offsets[max_tokens - 1][1]]

    def windows(
        self, question: str, passages: list[str], *, max_seq_length: int, stride: int
    ) -> list[list[Encoding]]:
        """The overlapping windows of each (question, passage) pair, special tokens added.

        Args:
            question: the question, already cut to length.
            passages: the passage texts (offsets of their tokens point into them).
            max_seq_length: tokens per window, special tokens included.
            stride: tokens shared by consecutive windows (lowered to fit the room the question leaves).

        Returns:
            Per passage, its windows in order.

        Raises:
            ValueError: the question leaves fewer than 8 tokens for the passage.
        """
        asked = len(self.backend.encode(question, add_special_tokens=False).ids)
        room = max_seq_length - asked - self.backend.num_special_tokens_to_add(True)
        if room < 8:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for the passage after the question"
            )
        cutter = self._cutter(max_seq_length, max(0, min(stride, room - 1)))
        pairs = [(question, p) if self.pad_right else (p, question) for p in passages]
        return [[encoding, *encoding.overflowing] for encoding in cutter.encode_batch(pairs)]

    def _cutter(self, max_seq_length: int, stride: int) -> Tokenizer:
        """A copy of the backend that truncates the passage with this stride, made once per setting.

        The backend itself is never reconfigured: truncation is state of a ``Tokenizer``, and concurrent
        questions share this object.
        """
        key = (max_seq_length, stride)
        cutter = self._cutters.get(key)
        if cutter is None:
            from tokenizers import Tokenizer

            cutter = Tokenizer.from_str(self.backend.to_str())
            cutter.enable_truncation(
                max_seq_length, stride=stride, strategy="only_second" if self.pad_right else "only_first"
            )
            self._cutters[key] = cutter  # a race makes two equal copies; either one is right
        return cutter

    def passage_offsets(self, window: Encoding) -> list[tuple[int, int] | None]:
        """Per token of a window, its char span in the passage; None for question and special tokens."""
        passage_id = 1 if self.pad_right else 0
        return [
            offset if sequence == passage_id else None
            for offset, sequence in zip(window.offsets, window.sequence_ids, strict=True)
        ]
