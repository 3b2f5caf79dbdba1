from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spanqa.ingest.catalog import Catalog
from spanqa.ingest.job import (
    CHANGED,
    FAILED,
    NEW,
    PRUNED,
    SKIPPED,
    UNCHANGED,
    IngestJob,
    IngestReport,
    PathNotFoundError,
)
from spanqa.ingest.model_check import ModelMismatchError
from spanqa.retriever.encoder import SentenceEncoder
from spanqa.retriever.index import EdgeVectorIndex, IndexPoint, VectorIndex, VectorIndexError
from spanqa.retriever.retriever import fold
from spanqa.settings import Settings
from spanqa.types import DocumentStatus

TEXTS = {
    "broncos.txt": "The Denver Broncos defeated the Carolina Panthers 24 to 10. " * 8
    + "\n\nThe game was played at Levi's Stadium in Santa Clara. " * 6,
    "warsaw.md": "# Warsaw\n\nWarsaw is the capital and largest city of Poland. It lies on the Vistula. " * 6,
    "sub/photo.html": "<html><body><h1>Photosynthesis</h1><p>"
    + "Photosynthesis converts light energy into chemical energy. " * 8
    + "</p></body></html>",
}


class CountingEncoder:
    """Wraps the real encoder and counts encode calls."""

    def __init__(self, inner: SentenceEncoder) -> None:
        self.inner = inner
        self.calls = 0
        self.texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    @property
    def max_seq_length(self) -> int:
        return self.inner.max_seq_length

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.encode(texts)


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


class Env:
    def __init__(self, settings: Settings, tmp_path: Path) -> None:
        self.settings = settings
        self.docs = tmp_path / "docs"
        self.docs.mkdir()
        self.catalog = Catalog(settings.catalog_url)
        self.index: VectorIndex = EdgeVectorIndex(settings.qdrant_path)
        self.encoder = CountingEncoder(SentenceEncoder(model=settings.retriever_model))
        self.job = IngestJob(
            catalog=self.catalog,
            encoder=self.encoder,
            index=self.index,
            chunk_tokens=settings.chunk_tokens,
            chunk_overlap=settings.chunk_overlap,
            max_file_bytes=int(settings.max_file_mb * 1e6),
        )

    @property
    def collection(self) -> str:
        active = self.catalog.active_index()
        assert active is not None
        return active.collection

    def assert_consistent(self) -> None:
        """Points in Qdrant are exactly the catalog's chunks, and every chunk is a slice of its document."""
        assert self.index.point_ids(self.collection) == self.catalog.chunk_ids()
        assert self.index.count(self.collection) == self.catalog.counts()["chunks"]
        for doc in self.catalog.list_documents(status=DocumentStatus.INDEXED):
            full = self.catalog.get_document(doc.id)
            assert full is not None
            chunks = self.catalog.chunks_of(doc.id)
            assert len(chunks) == full.num_chunks > 0
            for chunk in chunks:
                assert full.text[chunk.char_start : chunk.char_end] == chunk.text


@pytest.fixture
def env(settings: Settings, tmp_path: Path) -> Iterator[Env]:
    e = Env(settings, tmp_path)
    yield e
    e.index.close()
    e.catalog.close()


def test_ingest_a_folder_then_nothing_to_do(env: Env) -> None:
    write_tree(env.docs, TEXTS)
    report = env.job.run([env.docs])
    assert report.summary()["new"] == 3 and report.exit_code == 0
    assert report.chunks_embedded == env.catalog.counts()["chunks"] > 3
    # Where the time went, stage by stage, within the run's time.
    stages = report.stage_seconds
    assert {"read", "load", "chunk", "encode", "fold", "sparse", "store", "catalog"} <= set(stages)
    assert all(t >= 0 for t in stages.values()) and sum(stages.values()) <= report.seconds
    assert IngestReport.from_dict(report.to_dict()).stage_seconds.keys() == stages.keys()
    env.assert_consistent()
    doc = env.catalog.get_document_by_path(str(env.docs / "sub/photo.html"))
    assert doc is not None and doc.relative_path == "sub/photo.html" and doc.format == "html"

    calls = env.encoder.calls
    again = env.job.run([env.docs])
    assert again.summary()["unchanged"] == 3
    assert env.encoder.calls == calls  # no model work at all on an unchanged folder
    env.assert_consistent()


def test_changed_file_replaces_its_points(env: Env) -> None:
    write_tree(env.docs, TEXTS)
    env.job.run([env.docs])
    before = {
        c.id for c in env.catalog.chunks_of(env.catalog.get_document_by_path(str(env.docs / "warsaw.md")).id)
    }  # type: ignore[union-attr]
    (env.docs / "warsaw.md").write_text("# Kraków\n\nKraków was the capital of Poland until 1596. " * 3)
    report = env.job.run([env.docs])
    assert report.summary() == {"new": 0, "changed": 1, "unchanged": 2, "failed": 0, "pruned": 0}
    env.assert_consistent()
    doc = env.catalog.get_document_by_path(str(env.docs / "warsaw.md"), with_text=True)
    assert doc is not None and "Kraków" in doc.text and "Vistula" not in doc.text
    assert not before & env.index.point_ids(env.collection)


def test_prune_removes_vanished_files(env: Env) -> None:
    write_tree(env.docs, TEXTS)
    env.job.run([env.docs])
    gone = env.catalog.get_document_by_path(str(env.docs / "broncos.txt"))
    assert gone is not None
    (env.docs / "broncos.txt").unlink()
    report = env.job.run([env.docs], prune=True)
    assert report.count(PRUNED) == 1
    assert env.catalog.get_document(gone.id).status == DocumentStatus.DELETED  # type: ignore[union-attr]
    assert env.index.count(env.collection, document_id=gone.id) == 0
    env.assert_consistent()
    # Without --prune nothing is dropped.
    (env.docs / "warsaw.md").unlink()
    assert env.job.run([env.docs]).count(PRUNED) == 0


def test_bad_inputs_are_recorded_and_the_run_goes_on(env: Env) -> None:
    write_tree(
        env.docs,
        {
            "good.txt": TEXTS["broncos.txt"],
            "empty.txt": "",
            "blank.txt": "   \n\n  ",
            "binary.txt": bytes(range(256)) * 40,
            "corrupt.pdf": b"%PDF-1.4\n" + os.urandom(2000),
            "latin1.txt": "Caf\xe9 na\xefve: the caf\xe9 in Z\xfcrich serves cr\xe8me br\xfbl\xe9e.".encode(
                "latin-1"
            ),
        },
    )
    big = env.docs / "big.txt"
    with big.open("wb") as fh:  # 50 MB, sparse: the size check must refuse it before reading
        fh.truncate(50 * 1024 * 1024)
    os.symlink(env.docs, env.docs / "loop")
    report = env.job.run([env.docs])
    by_name = {Path(o.path).name: o for o in report.outcomes}
    assert by_name["good.txt"].status == NEW
    assert by_name["latin1.txt"].status == NEW
    for name in ("binary.txt", "corrupt.pdf", "big.txt"):
        assert by_name[name].status == FAILED, name
        assert by_name[name].error and "\n" not in by_name[name].error
    # An empty or blank file has nothing to index: skipped, counted under its reason, never failed.
    assert by_name["empty.txt"].status == by_name["blank.txt"].status == SKIPPED
    assert report.skipped["empty file"] == 2
    assert "SPANQA_MAX_FILE_MB" in (by_name["big.txt"].error or "")
    assert report.exit_code == 1
    assert len(report.outcomes) == 7  # the symlink loop is walked once
    latin = env.catalog.get_document_by_path(str(env.docs / "latin1.txt"), with_text=True)
    assert latin is not None and "Zürich" in latin.text and "crème brûlée" in latin.text
    failed = env.catalog.list_documents(status=DocumentStatus.FAILED)
    assert {Path(d.path).name for d in failed} == {"binary.txt", "corrupt.pdf", "big.txt"}
    env.assert_consistent()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_recorded(env: Env) -> None:
    write_tree(env.docs, {"secret.txt": "hidden words"})
    (env.docs / "secret.txt").chmod(0)
    report = env.job.run([env.docs])
    assert report.outcomes[0].status == FAILED


@pytest.mark.parametrize("breakage", ["emptied", "corrupted"])
def test_a_file_that_no_longer_loads_stops_answering(env: Env, breakage: str) -> None:
    write_tree(env.docs, {"notes.txt": TEXTS["broncos.txt"], "other.txt": TEXTS["warsaw.md"]})
    env.job.run([env.docs])
    notes = env.docs / "notes.txt"
    doc = env.catalog.get_document_by_path(str(notes))
    assert doc is not None and doc.num_chunks > 0
    if breakage == "emptied":
        notes.write_bytes(b"")
    else:
        notes.write_bytes(b"\x00\x01\x02" * 100)
    report = env.job.run([env.docs])
    # Emptied, it is skipped (nothing to index, the run is fine); corrupted, it failed. Either way its old
    # version is gone.
    expected = (
        (SKIPPED, DocumentStatus.DELETED, 0) if breakage == "emptied" else (FAILED, DocumentStatus.FAILED, 1)
    )
    assert [o.status for o in report.outcomes if o.path == str(notes)] == [expected[0]]
    assert report.exit_code == expected[2]
    failed = env.catalog.get_document(doc.id)
    assert failed is not None and failed.status == expected[1] and failed.text == ""
    assert env.catalog.chunks_of(doc.id) == []
    assert (
        env.index.count(env.collection, document_id=doc.id) == 0
    )  # no point can bring it back into an answer
    env.assert_consistent()
    # Fixed again: indexed anew, error cleared.
    notes.write_text(TEXTS["warsaw.md"])
    assert [o.status for o in env.job.run([env.docs]).outcomes if o.path == str(notes)] == ["new"]
    assert env.catalog.get_document(doc.id).error is None  # type: ignore[union-attr]


def test_vanished_and_renamed_files_are_pruned(env: Env) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"], "b.txt": TEXTS["warsaw.md"]})
    env.job.run([env.docs], prune=True)
    a = env.catalog.get_document_by_path(str(env.docs / "a.txt"))
    (env.docs / "b.txt").unlink()
    (env.docs / "a.txt").rename(env.docs / "c.txt")
    report = env.job.run([env.docs], prune=True)
    assert report.summary()["pruned"] == 2 and report.summary()["new"] == 1
    assert a is not None and env.catalog.get_document(a.id).status == DocumentStatus.DELETED  # type: ignore[union-attr]
    assert env.index.count(env.collection, document_id=a.id) == 0
    env.assert_consistent()


def test_missing_path_and_empty_folder(env: Env, tmp_path: Path) -> None:
    with pytest.raises(PathNotFoundError):
        env.job.run([tmp_path / "does-not-exist"])
    empty = tmp_path / "empty"
    empty.mkdir()
    report = env.job.run([empty])
    assert report.outcomes == [] and report.exit_code == 0


def test_hidden_files_and_globs(env: Env) -> None:
    write_tree(
        env.docs,
        {
            ".secret.txt": "x " * 50,
            ".git/config.txt": "y " * 50,
            "a.txt": "alpha " * 30,
            "b.md": "beta " * 30,
            "c.py": "print('source code is text too')",
            "d.bin": bytes(range(256)),
        },
    )
    names = {Path(f.path).name for f in env.job.discover([env.docs])}
    assert names == {"a.txt", "b.md", "c.py"}
    assert env.job.skipped == {"hidden": 2, "not text": 1}
    names = {Path(f.path).name for f in env.job.discover([env.docs], exclude=["*.md", "*.py"])}
    assert names == {"a.txt"} and env.job.skipped["excluded"] == 2
    names = {Path(f.path).name for f in env.job.discover([env.docs], include=["*.md"])}
    assert names == {"b.md"}
    # A file named explicitly is taken whatever its type, and fails with a reason when it is not text.
    report = env.job.run([env.docs / "d.bin"])
    assert report.outcomes[0].status == FAILED and report.outcomes[0].error == "binary file"


def test_orphan_points_are_removed_at_the_next_run(env: Env) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"]})
    env.job.run([env.docs])
    vector = np.ones(env.encoder.dimension, dtype=np.float32) / np.sqrt(env.encoder.dimension)
    orphan = IndexPoint(
        id="00000000-0000-4000-8000-000000000001", vector=vector, payload={"document_id": "x", "path": "x"}
    )
    env.index.upsert(env.collection, [orphan])
    report = env.job.run([env.docs])
    assert report.orphans_removed == 1
    env.assert_consistent()


def test_missing_points_are_restored(env: Env) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"], "b.md": TEXTS["warsaw.md"]})
    env.job.run([env.docs])
    lost = sorted(env.catalog.chunk_ids())[:3]
    env.index.delete_points(env.collection, lost)
    calls = env.encoder.texts
    assert env.job.restore_missing() == 3
    assert env.encoder.texts == calls + 3  # only the lost chunks are embedded again
    env.assert_consistent()
    assert env.job.restore_missing() == 0


def test_a_different_retriever_model_is_refused(env: Env, settings: Settings, tmp_path: Path) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"]})
    env.job.run([env.docs])
    (env.docs / "b.txt").write_text("new file " * 20)
    other = CountingEncoder(SentenceEncoder(model=str(tmp_path / "another-model")))
    job = IngestJob(catalog=env.catalog, encoder=other, index=env.index)
    with pytest.raises(ModelMismatchError, match="retriever model"):
        job.run([env.docs])
    assert other.calls == 0


def test_unchanged_outcome_reports_chunks(env: Env) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"]})
    first = env.job.run([env.docs])
    again = env.job.run([env.docs])
    assert again.outcomes[0].status == UNCHANGED
    assert again.outcomes[0].chunks == first.outcomes[0].chunks


def _lexical_paths(env: Env, query: str) -> set[str]:
    from spanqa.retriever.lexical import Bm25Encoder

    hits = env.index.search_lexical(env.collection, Bm25Encoder().query(query), limit=50)
    return {Path(h.payload["path"]).name for h in hits}


def test_lexical_terms_follow_change_delete_and_prune(env: Env) -> None:
    write_tree(env.docs, TEXTS)
    env.job.run([env.docs])
    assert _lexical_paths(env, "Vistula") == {"warsaw.md"}
    assert _lexical_paths(env, "Photosynthesis") == {"photo.html"}  # the heading path is indexed too
    (env.docs / "warsaw.md").write_text("# Kraków\n\nKraków was the capital of Poland until 1596. " * 3)
    env.job.run([env.docs])
    assert _lexical_paths(env, "Vistula") == set() and _lexical_paths(env, "1596") == {"warsaw.md"}
    doc = env.catalog.get_document_by_path(str(env.docs / "sub/photo.html"))
    assert doc is not None
    env.job.remove_document(doc.id)
    assert _lexical_paths(env, "Photosynthesis") == set()
    (env.docs / "broncos.txt").unlink()
    env.job.run([env.docs], prune=True)
    assert _lexical_paths(env, "Broncos Panthers") == set()
    assert _lexical_paths(env, "Kraków") == {"warsaw.md"}
    env.assert_consistent()


def test_a_page_of_links_is_indexed_without_chunks(env: Env) -> None:
    links = "".join(f'<li><a href="p{i}.html">entry {i}, 12</a></li>' for i in range(40))
    write_tree(env.docs, {"genindex.html": f"<html><body><h1>Index</h1><ul>{links}</ul></body></html>"})
    report = env.job.run([env.docs])
    assert report.summary()["new"] == 1 and report.exit_code == 0
    doc = env.catalog.get_document_by_path(str(env.docs / "genindex.html"))
    assert doc is not None and doc.status == DocumentStatus.INDEXED and doc.num_chunks == 0
    assert env.index.count(env.collection) == 0


def test_text_files_are_found_by_content_and_skipped_files_counted(env: Env) -> None:
    write_tree(
        env.docs,
        {
            "README": "Project Foo is released under the MIT licence.",
            "people.csv": "name,age\nalice,30\n",
            "config.json": '{"retries": 3}',
            "tool.py": "print('hello')\n",
            "blob": bytes(range(256)) * 8,
            "picture.png": b"not really a png",
            ".secret.txt": "hidden words",
        },
    )
    report = env.job.run([env.docs])
    formats = {Path(d.path).name: d.format for d in env.catalog.list_documents()}
    assert formats == {"README": "txt", "people.csv": "txt", "config.json": "txt", "tool.py": "txt"}
    assert report.skipped == {"hidden": 1, "not text": 2} and report.exit_code == 0
    # Each skipped file is named with its reason and what would take it in.
    named = {Path(f.path).name: (f.reason, f.hint) for f in report.skipped_files}
    assert set(named) == {".secret.txt", "blob", "picture.png"}
    assert named["picture.png"][0] == "not text" and "--include '*.png'" in named["picture.png"][1]
    assert named["blob"] == ("not text", "binary content")
    assert named[".secret.txt"][0] == "hidden" and "starts with '.'" in named[".secret.txt"][1]


def test_a_fifo_in_the_folder_is_never_opened(env: Env) -> None:
    write_tree(env.docs, {"a.txt": TEXTS["broncos.txt"]})
    os.mkfifo(env.docs / "pipe")  # opening it for reading would block forever
    assert [Path(f.path).name for f in env.job.discover([env.docs])] == ["a.txt"]


def test_symlinks_out_of_the_folder_are_not_followed_unless_allowed(env: Env, tmp_path: Path) -> None:
    write_tree(env.docs, {"inside.txt": TEXTS["broncos.txt"]})
    outside = tmp_path / "elsewhere"
    write_tree(outside, {"secret.txt": "The secret code is 4242.", "more/notes.txt": "More private notes."})
    os.symlink(outside, env.docs / "linked-folder")
    os.symlink(outside / "secret.txt", env.docs / "linked-file.txt")
    os.symlink(env.docs / "inside.txt", env.docs / "alias.txt")  # a link inside the folder is fine
    report = env.job.run([env.docs])
    assert {Path(o.path).name for o in report.outcomes} == {"inside.txt", "alias.txt"}
    assert report.skipped["linked from outside"] == 2  # the folder (not walked) and the file
    env.job.follow_symlinks_out = True
    followed = env.job.run([env.docs])
    assert {"secret.txt", "notes.txt", "linked-file.txt"} <= {Path(o.path).name for o in followed.outcomes}
    env.assert_consistent()
    # Confined again: what came in through the links is pruned, not left answering.
    env.job.follow_symlinks_out = False
    pruned = env.job.run([env.docs], prune=True)
    assert {Path(o.path).name for o in pruned.outcomes if o.status == PRUNED} == {
        "secret.txt",
        "notes.txt",
        "linked-file.txt",
    }
    env.assert_consistent()


class WordsEncoder(CountingEncoder):
    """Bag-of-words vectors: texts that share all but one of sixty words have a cosine of 59/60 (0.983)."""

    DIMENSION = 1024

    @property
    def dimension(self) -> int:
        return self.DIMENSION

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.DIMENSION] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_near_duplicate_chunks_are_folded_into_one_group(env: Env) -> None:
    words = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(60)]  # "waa", "wab", ...: no digits
    paragraph = " ".join(words) + "\n"
    write_tree(
        env.docs,
        {
            "a.txt": paragraph,
            "b.txt": paragraph.replace(words[30], "changed"),  # one word of sixty: cosine 0.983
            "c.txt": paragraph.replace(" ".join(words[30:33]), "x y z"),  # three: 0.95, below the default
            "sub/copy.txt": paragraph,
            # One word from the others too, but a value: they say something else, and are not folded.
            "d.txt": paragraph.replace(words[30], "4MB"),
            "e.txt": paragraph.replace(words[30], "64MB"),
        },
    )

    def job(fold_similarity: float = Settings.fold_similarity) -> IngestJob:
        encoder = WordsEncoder(env.encoder.inner)
        return IngestJob(
            catalog=env.catalog, encoder=encoder, index=env.index, fold_similarity=fold_similarity
        )

    def folds() -> dict[str, str | None]:
        out = {}
        for doc in env.catalog.list_documents(status=DocumentStatus.INDEXED):
            (chunk,) = env.catalog.chunks_of(doc.id)
            out[doc.relative_path] = chunk.fold or chunk.id
        return out

    job().run([env.docs])
    group = folds()
    first = group["a.txt"]
    assert group == {
        "a.txt": first,
        "b.txt": first,
        "c.txt": group["c.txt"],
        "sub/copy.txt": first,
        "d.txt": group["d.txt"],
        "e.txt": group["e.txt"],
    }
    assert len({first, group["c.txt"], group["d.txt"], group["e.txt"]}) == 4
    env.assert_consistent()
    # The group is in each point's payload, where the retriever folds it.
    vector = WordsEncoder(env.encoder.inner).encode([paragraph])[0]
    hits = env.index.search(env.collection, vector, limit=6)
    assert sorted(str(h.payload["fold"]) for h in hits) == sorted(group.values())
    kept, copies = fold(hits, top_k=6)
    assert len(kept) == 4 and len(copies[kept[0].id]) == 2

    # A later run folds a new copy into the indexed group; a changed file leaves it.
    write_tree(env.docs, {"later.txt": paragraph, "b.txt": "Something else entirely.\n"})
    job().run([env.docs])
    group = folds()
    assert group["later.txt"] == first and group["b.txt"] not in {first, group["c.txt"], group["d.txt"]}
    env.assert_consistent()

    # Above 1, nothing folds.
    write_tree(env.docs, {"later.txt": paragraph + "\n"})
    job(fold_similarity=1.01).run([env.docs])
    assert folds()["later.txt"] not in {first, group["c.txt"]}


def test_a_large_folder_is_streamed_not_held(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The texts of a folder are held a batch at a time, never all at once (peak memory of a big ingest)."""
    import gc
    import weakref

    import spanqa.ingest.job as job_module
    from spanqa.types import Document

    made: list[weakref.ref[Document]] = []
    held: list[int] = []

    class TrackedDocument(Document):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    class Watching(CountingEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            gc.collect()
            held.append(sum(ref() is not None for ref in made))
            return super().encode(texts)

    monkeypatch.setattr(job_module, "Document", TrackedDocument)
    write_tree(env.docs, {f"f{i:03d}.txt": f"File {i} says the answer is {i * 7}." for i in range(40)})
    job = IngestJob(catalog=env.catalog, encoder=Watching(env.encoder.inner), index=env.index, encode_group=4)
    assert job.run([env.docs]).count(NEW) == 40
    assert len(made) == 40 and len(held) >= 10
    assert max(held) <= 4  # one encoder batch of one-chunk files; holding the folder would be 40
    env.assert_consistent()


def test_new_chunk_sizes_cut_every_file_again(env: Env) -> None:
    write_tree(env.docs, TEXTS)
    assert env.job.run([env.docs]).count(NEW) == 3
    before = env.catalog.chunk_ids()
    assert env.job.run([env.docs]).count(UNCHANGED) == 3
    smaller = IngestJob(
        catalog=env.catalog, encoder=env.encoder, index=env.index, chunk_tokens=24, chunk_overlap=4
    )
    report = smaller.run([env.docs])
    assert report.count(CHANGED) == 3  # the same files, cut anew: no passages of two cuts side by side
    assert len(env.catalog.chunk_ids()) > len(before)  # smaller passages: more of them
    env.assert_consistent()
    assert smaller.run([env.docs]).count(UNCHANGED) == 3
    doc = env.catalog.list_documents(status=DocumentStatus.INDEXED)[0]
    assert env.catalog.get_document(doc.id).chunking == "v1:24/4"  # type: ignore[union-attr]


def test_a_long_run_builds_the_search_index_as_it_goes(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # Vectors outside the graph are searched exhaustively by every batch's near-duplicate check: a run that
    # built only at its end would slow down with the square of its size.
    write_tree(env.docs, {f"f{i:03d}.txt": f"File {i} says the answer is {i * 7}." for i in range(40)})
    done: list[int] = []
    builds: list[int] = []  # files done when each build ran
    monkeypatch.setattr(env.index, "build_search_index", lambda name: builds.append(len(done)) or True)
    job = IngestJob(
        catalog=env.catalog, encoder=env.encoder, index=env.index, encode_group=4, hnsw_build_at=10
    )
    report = job.run([env.docs], on_progress=lambda progress: done.append(progress.files_done))
    assert report.count(NEW) == 40 and report.chunks_embedded == 40
    # Batches of four one-chunk files: a build once ten chunks came since the last, and one at the end.
    assert builds == [12, 24, 36, 40]
    env.assert_consistent()


def test_a_run_that_leaves_many_vectors_unindexed_builds_the_search_index(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanqa.retriever.index import IndexStats

    write_tree(env.docs, TEXTS)
    built: list[str] = []
    told: list[int] = []
    monkeypatch.setattr(env.index, "stats", lambda name: IndexStats(30_000, 1_000, 3))
    monkeypatch.setattr(env.index, "build_search_index", lambda name: built.append(name) or True)
    env.job.hnsw_build_at = 20_000
    env.job.on_build = told.append
    report = env.job.run([env.docs])
    assert built == [env.job.active_collection()] and told == [29_000]
    assert report.index_build_seconds >= 0 and report.to_dict()["index_build_seconds"] >= 0
    assert report.index_build_note is None

    def refuse(name: str) -> bool:
        raise VectorIndexError(f"collection {name!r} was written while its graph was built")

    monkeypatch.setattr(env.index, "build_search_index", refuse)
    write_tree(env.docs, {"late.txt": "A late file about Krakow."})
    refused = env.job.run([env.docs])  # the files stand; the report says why the graph did not
    assert refused.count("new") == 1 and "written while its graph was built" in (
        refused.index_build_note or ""
    )
    assert IngestReport.from_dict(refused.to_dict()).index_build_note == refused.index_build_note
    monkeypatch.setattr(env.index, "build_search_index", lambda name: built.append(name) or True)
    env.job.hnsw_build_at = 50_000  # fewer left out than the setting: nothing built
    write_tree(env.docs, {"more.txt": "Another file about Warsaw and the Vistula river."})
    env.job.run([env.docs])
    assert len(built) == 1
