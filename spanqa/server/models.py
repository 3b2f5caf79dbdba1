"""Request and response models of the HTTP API: the shapes of the CLI's ``--json`` (``spanqa.records``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from spanqa.types import AskOptions, SearchOptions


class AskRequest(BaseModel):
    """``POST /ask``: a question and the options of ``spanqa ask``."""

    question: str = Field(min_length=1, description="at most serve_max_question_chars characters")
    answers: int | None = Field(default=None, ge=1, le=50, description="answers to return")
    passages: int | None = Field(default=None, ge=1, le=200, description="passages to read")
    min_score: float | None = Field(default=None, ge=0.0, le=1.0, description="hide less likely answers")
    path: str | None = Field(default=None, max_length=1000, description="only documents matching this glob")

    def options(self) -> AskOptions:
        return AskOptions(self.passages, self.answers, self.min_score, self.path)


class InternalAsk(BaseModel):
    """A question another spanqa process on the same data folder sends to the server: the question and
    ``AskOptions.to_dict()``."""

    question: str = Field(min_length=1)
    passages: int | None = Field(default=None, ge=1)
    answers: int | None = Field(default=None, ge=1)
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    path_glob: str | None = None

    def options(self) -> AskOptions:
        return AskOptions.from_dict(self.model_dump())


class InternalSearch(BaseModel):
    """A search another spanqa process on the same data folder sends to the server: the query and
    ``SearchOptions.to_dict()``."""

    query: str = Field(min_length=1)
    top_k: int | None = Field(default=None, ge=1)
    path_glob: str | None = None

    def options(self) -> SearchOptions:
        return SearchOptions.from_dict(self.model_dump())


class InternalIngest(BaseModel):
    """An ingest another spanqa process on the same data folder runs through the server (absolute paths)."""

    paths: list[str] = Field(min_length=1)
    prune: bool = True
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class InternalRemove(BaseModel):
    """A document another spanqa process on the same data folder removes through the server."""

    document_id: str = Field(min_length=1, max_length=100)


class _Record(BaseModel):
    """A record spanqa prints and serves: its fields are the whole shape (the published JSON Schema says no
    other field may appear, so a field added in one place and not here fails the schema test)."""

    model_config = ConfigDict(extra="forbid")


class CopyOut(_Record):
    """A near-duplicate folded into a passage (not read again): where it lives."""

    path: str
    page: int | None
    char_start: int
    char_end: int
    document_id: str
    chunk_id: str


class PassageOut(CopyOut):
    rank: int
    score: float
    heading: str
    text: str
    copies: list[CopyOut]


class AnswerPassage(_Record):
    chunk_id: str
    char_start: int
    char_end: int
    score: float
    rank: int


class SourceOut(_Record):
    """Another place that gives the same answer."""

    path: str
    document_id: str
    char_start: int
    char_end: int
    page: int | None


class AnswerOut(_Record):
    """An exact span: ``text`` is the document's text at ``[char_start, char_end)``; ``score`` the probability
    that it is right."""

    text: str
    score: float
    relative_score: float
    path: str
    document_id: str
    char_start: int
    char_end: int
    page: int | None
    reader_score: float
    retriever_score: float
    context: str
    context_start: int
    also_in: list[SourceOut]
    passage: AnswerPassage
    #: Where the answer starts in the file on disk (1-based line, byte column), for text, Markdown and HTML
    #: files; None for formats editors do not open as their text (PDF, DOCX, man pages...).
    line: int | None = None
    column: int | None = None
    #: The printed label of the answer's page ("xii", "42") where the document declares or shows one;
    #: ``page`` is the physical page (1-based).
    page_label: str | None = None


class AskResponse(_Record):
    question: str
    abstained: bool
    answers: list[AnswerOut]
    passages: list[PassageOut]
    timings_ms: dict[str, float]
    warnings: list[str]


class SearchResponse(_Record):
    query: str
    passages: list[PassageOut]
    timings_ms: dict[str, float]


#: The records published as JSON Schemas in docs/schemas/ (``scripts/write_schemas.py`` writes them).
PUBLISHED: dict[str, type[_Record]] = {"ask": AskResponse, "search": SearchResponse}


def published_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a published record: the shape of ``spanqa ask --json`` and ``POST /ask`` ("ask"),
    of ``spanqa search --json`` and ``GET /search`` ("search")."""
    schema = PUBLISHED[name].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


class _DocumentFields(BaseModel):
    id: str
    path: str
    relative_path: str
    status: str
    format: str
    pages: int | None
    size: int
    sha256: str
    error: str | None
    updated_at: str | None


class DocumentOut(_DocumentFields):
    """One document as ``spanqa docs list --json`` shows it (``chunks``: how many)."""

    chunks: int


class ChunkOut(BaseModel):
    id: str
    ordinal: int
    char_start: int
    char_end: int
    page: int | None


class Highlight(BaseModel):
    char_start: int
    char_end: int


class DocumentDetail(_DocumentFields):
    """A document with its chunks, its indexed text and the span asked to be highlighted."""

    chunks: list[ChunkOut]
    text: str | None = None
    highlight: Highlight | None = None


class IngestRequest(BaseModel):
    """``POST /ingest``: a file or folder under one of the ``serve_roots``."""

    path: str = Field(min_length=1, max_length=4096)
    prune: bool = True


class JobOut(BaseModel):
    id: str
    kind: str
    state: str
    total: int
    done: int
    failed: int
    error: str | None
    arguments: dict[str, Any]
    created_at: str | None
    updated_at: str | None


class Health(BaseModel):
    status: str
    documents: int
    chunks: int
    models_loaded: bool
    version: str


class ErrorOut(BaseModel):
    """Every error: one line, never a traceback."""

    error: str
