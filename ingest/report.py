"""What an ingest run did, file by file, and how far it is: the records the ingest job, the CLI, a server
and the workers share."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from spanqa.ingest.walk import SkippedFile

NEW, CHANGED, UNCHANGED, FAILED, PRUNED = "new", "changed", "unchanged", "failed", "pruned"
#: A file with nothing of its own to index (a man page alias): not failed, counted under its reason.
SKIPPED = "skipped"


@dataclass(frozen=True)
class FileOutcome:
    path: str
    status: str
    chunks: int = 0
    error: str | None = None


@dataclass
class IngestReport:
    """What one ingest run did, file by file."""

    outcomes: list[FileOutcome] = field(default_factory=list)
    seconds: float = 0.0
    chunks_embedded: int = 0
    orphans_removed: int = 0
    #: Files under the folders that were not taken, by reason (hidden, not text, excluded).
    skipped: dict[str, int] = field(default_factory=dict)
    #: The same files by name, with why and what would take them in.
    skipped_files: list[SkippedFile] = field(default_factory=list)
    #: Of ``seconds``, the time spent loading the encoder (not ingest work: rates leave it out).
    load_seconds: float = 0.0
    #: Where the time went, by stage: read (hashing files), load (text out of files), chunk, encode,
    #: fold (near-duplicates), sparse (BM25 terms), store (the vector store), catalog.
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Time spent building the HNSW graph during and after the run (0: not due, see ``hnsw_build_at``).
    index_build_seconds: float = 0.0
    #: Why a due HNSW build left the graph as it was (None: built, or not due); the files stand either way.
    index_build_note: str | None = None

    @property
    def chunks_per_second(self) -> float:
        """Chunks embedded per second of ingest work (model loading left out)."""
        work = self.seconds - self.load_seconds
        return self.chunks_embedded / work if work > 0 else 0.0

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failures(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == FAILED]

    @property
    def exit_code(self) -> int:
        """0 when every file is fine, 1 when some failed."""
        return 1 if self.failures else 0

    def summary(self) -> dict[str, int]:
        return {status: self.count(status) for status in (NEW, CHANGED, UNCHANGED, FAILED, PRUNED)}

    def to_dict(self) -> dict[str, Any]:
        """The report as ``spanqa ingest --json`` prints it (and as a server sends it to the CLI)."""
        return {
            "summary": self.summary(),
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
            "model_load_seconds": round(self.load_seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 2),
            "orphans_removed": self.orphans_removed,
            "skipped": dict(self.skipped),
            "skipped_files": [dataclasses.asdict(f) for f in self.skipped_files],
            "stage_seconds": {stage: round(t, 3) for stage, t in self.stage_seconds.items()},
            "index_build_seconds": round(self.index_build_seconds, 3),
            "index_build_note": self.index_build_note,
            "files": [dataclasses.asdict(o) for o in self.outcomes],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IngestReport:
        """The report ``to_dict`` gave (``chunks_per_second`` and ``summary`` follow from the rest)."""
        return cls(
            outcomes=[FileOutcome(**o) for o in data["files"]],
            seconds=float(data["seconds"]),
            chunks_embedded=int(data["chunks_embedded"]),
            orphans_removed=int(data["orphans_removed"]),
            skipped={str(k): int(v) for k, v in data["skipped"].items()},
            skipped_files=[SkippedFile(**f) for f in data["skipped_files"]],
            load_seconds=float(data["model_load_seconds"]),
            stage_seconds={str(k): float(v) for k, v in data.get("stage_seconds", {}).items()},
            index_build_seconds=float(data.get("index_build_seconds", 0.0)),
            index_build_note=data.get("index_build_note"),
        )


@dataclass(frozen=True)
class Progress:
    """Sent after each file: how far the run is."""

    files_done: int
    files_total: int
    chunks_done: int
    path: str
    status: str
    load_seconds: float = 0.0
    """Of the run so far, the time spent loading the encoder (rates leave it out)."""
