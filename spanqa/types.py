"""Plain dataclasses every layer shares. No heavy imports here."""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

CHUNK_ID_NAMESPACE = uuid.UUID("6f1c1a52-4bb1-4d36-9c1e-2a8e1f5f0b7d")


class DocumentStatus(StrEnum):
    INDEXED = "indexed"
    FAILED = "failed"
    DELETED = "deleted"


class IndexStatus(StrEnum):
    BUILDING = "building"
    ACTIVE = "active"
    RETIRED = "retired"


@dataclass
class Document:
    """One source file and the text extracted from it (answers are offsets into ``text``)."""

    id: str
    path: str
    relative_path: str
    sha256: str
    size: int
    mtime: float
    format: str
    status: DocumentStatus = DocumentStatus.INDEXED
    error: str | None = None
    page_count: int | None = None
    text: str = ""
    num_chunks: int = 0
    page_starts: list[tuple[int, int]] = field(default_factory=list)
    #: The printed label of each page, in the order of ``page_starts`` ("xii", "42"; None: not known); empty
    #: when no page's label is known.
    page_labels: list[str | None] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    chunking: str | None = None
    """How its chunks were cut (the chunker's version and sizes); None: before spanqa recorded it."""

    def page_at(self, offset: int) -> int | None:
        """The page number holding ``text[offset]`` (None for formats without pages)."""
        return page_at(self.page_starts, offset)

    def page_label(self, page: int) -> str | None:
        """The printed label of page ``page`` (1-based, physical), where it is known."""
        numbers = [number for number, _ in self.page_starts]
        if page not in numbers or not self.page_labels:
            return None
        return self.page_labels[numbers.index(page)]


def page_at(page_starts: list[tuple[int, int]], offset: int) -> int | None:
    """The page whose start is the last one at or before ``offset``; ``page_starts`` holds (page, start)."""
    if not page_starts:
        return None
    index = bisect.bisect_right([start for _, start in page_starts], offset) - 1
    return page_starts[max(index, 0)][0]


class _Options:
    """Options sent to another process as JSON: every field by name; a missing one is None (its setting)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class AskOptions(_Options):
    """How one question is answered: the same record from the CLI, over HTTP and on a worker. None takes the
    setting of the same name (``passages``, ``answers``, ``min_score``); ``path_glob`` keeps to documents
    whose path matches it."""

    passages: int | None = None
    answers: int | None = None
    min_score: float | None = None
    path_glob: str | None = None


@dataclass(frozen=True)
class SearchOptions(_Options):
    """How one search is run (the retriever alone): ``top_k`` passages (None: the ``search_top_k``
    setting), only from documents whose path matches ``path_glob``."""

    top_k: int | None = None
    path_glob: str | None = None


@dataclass(frozen=True)
class Place:
    """Where an answer lies in its file, as a person opens it: a line and byte column in a text file, the
    printed label of its page in a paged one; None where the format or the file does not say."""

    line: int | None = None
    column: int | None = None
    page_label: str | None = None


@dataclass(frozen=True)
class Chunk:
    """A window of a document's text; ``document.text[char_start:char_end] == text``.

    ``heading`` is the heading path above it (``Memory > work_mem (integer)``); ``segments`` are its blocks,
    [start, end) offsets relative to ``char_start`` (empty: the whole chunk is one block). An answer lies
    inside one segment: it never crosses a block boundary. ``title`` is, for a later piece of a definition
    cut in several, its entry's term as it stands in the document at ``title_start`` (before the chunk).
    ``fold`` names the group of near-duplicate chunks it belongs to when it nearly repeats a chunk indexed
    before it (cosine at or above the ``fold_similarity`` setting); None: it starts its own (its id).
    """

    id: str
    document_id: str
    ordinal: int
    char_start: int
    char_end: int
    text: str
    page: int | None = None
    heading: str = ""
    segments: tuple[tuple[int, int], ...] = ()
    title: str = ""
    title_start: int | None = None
    fold: str | None = None

    @property
    def fold_label(self) -> str:
        """The near-duplicate group it belongs to: its ``fold``, else its own id."""
        return self.fold or self.id

    @property
    def search_text(self) -> str:
        """What the retriever indexes: the heading path, the entry's title, then the text."""
        return prefixed(self.heading, self.title, self.text).text

    @staticmethod
    def make_id(document_id: str, ordinal: int, text: str) -> str:
        """Deterministic chunk id: the same document, position and text always give the same id."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return str(uuid.uuid5(CHUNK_ID_NAMESPACE, f"{document_id}:{ordinal}:{digest}"))


@dataclass(frozen=True)
class Prefixed:
    """A passage's text behind its heading path and its entry's title, one per line."""

    text: str
    title_start: int
    """Where the title begins in ``text`` (where the passage's own text begins when it has no title)."""
    body_start: int
    """Where the passage's own text begins in ``text``."""


def prefixed(heading: str, title: str, body: str) -> Prefixed:
    """The heading path, the entry's title, then the text: what the retriever indexes and the reader reads."""
    head = f"{heading}\n" if heading else ""
    entry = f"{title}\n" if title else ""
    return Prefixed(head + entry + body, len(head), len(head) + len(entry))


@dataclass(frozen=True)
class PassageCopy:
    """A near-duplicate of a passage, folded into it so one text is not read twice: where it lives."""

    chunk_id: str
    document_id: str
    path: str
    char_start: int
    char_end: int
    text: str
    page: int | None = None


@dataclass(frozen=True)
class Passage:
    """A chunk found by the retriever, with its score and where it lives.

    ``score`` is the retriever's score for it (cosine, BM25, or the fused score in hybrid retrieval);
    ``heading``, ``segments``, ``title`` and ``title_start`` are the chunk's (see ``Chunk``). The
    ``dense_*`` and ``lexical_*`` fields are its cosine and BM25 score and 1-based rank in each list before
    fusion (None where that list was not searched or did not hold it): evidence for the answer's score.
    ``copies`` are the near-duplicates retrieved with it and folded into it (not read again).
    """

    chunk_id: str
    document_id: str
    path: str
    text: str
    char_start: int
    char_end: int
    score: float
    page: int | None = None
    ordinal: int = 0
    rank: int = 0
    heading: str = ""
    segments: tuple[tuple[int, int], ...] = ()
    title: str = ""
    title_start: int | None = None
    dense_score: float | None = None
    dense_rank: int | None = None
    lexical_score: float | None = None
    lexical_rank: int | None = None
    copies: tuple[PassageCopy, ...] = ()

    def text_at(self, start: int, end: int) -> str:
        """The document's text at [start, end) when it lies in this passage or its title."""
        if self.char_start <= start <= end <= self.char_end:
            return self.text[start - self.char_start : end - self.char_start]
        if self.title_start is not None and self.title_start <= start <= end <= self.title_start + len(
            self.title
        ):
            return self.title[start - self.title_start : end - self.title_start]
        raise ValueError(f"[{start}, {end}) is neither in passage {self.chunk_id} nor in its title")


@dataclass(frozen=True)
class AnswerSource:
    """Another place that gives the same answer: ``document.text[char_start:char_end]`` there."""

    path: str
    document_id: str
    char_start: int
    char_end: int
    page: int | None = None


@dataclass(frozen=True)
class Answer:
    """An exact span of a document; ``document.text[char_start:char_end] == text``.

    ``score`` is the calibrated probability that the answer is right (where the reader has a calibrator;
    else ``relative_score``); ``relative_score`` is how it compares with the other candidates and "no
    answer" (a softmax); ``reader_score`` is the span's start + end logits; ``features`` what the
    calibrator read; ``also_in`` the other places that give the same answer (in the passages read, and in
    the near-duplicates folded into them).
    """

    text: str
    score: float
    path: str
    document_id: str
    char_start: int
    char_end: int
    page: int | None
    passage: Passage
    reader_score: float
    retriever_score: float
    context: str = ""
    context_start: int = 0
    relative_score: float = 0.0
    features: dict[str, float] = field(default_factory=dict)
    also_in: tuple[AnswerSource, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "score": self.score,
            "relative_score": self.relative_score,
            "path": self.path,
            "document_id": self.document_id,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "page": self.page,
            "reader_score": self.reader_score,
            "retriever_score": self.retriever_score,
            "context": self.context,
            "context_start": self.context_start,
            "also_in": [dataclasses.asdict(source) for source in self.also_in],
            "passage": {
                "chunk_id": self.passage.chunk_id,
                "char_start": self.passage.char_start,
                "char_end": self.passage.char_end,
                "score": self.passage.score,
                "rank": self.passage.rank,
            },
        }


@dataclass
class IndexVersion:
    """One vector collection: which model filled it and whether questions are answered from it."""

    id: int
    model_name: str
    dimension: int
    collection: str
    status: IndexStatus
    created_at: datetime | None = None
    pooling: str = "auto"


@dataclass
class Job:
    """Background or inline work shown by ``spanqa jobs``."""

    id: str
    kind: str
    arguments: dict[str, Any] = field(default_factory=dict)
    state: str = "pending"
    total: int = 0
    done: int = 0
    failed: int = 0
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
