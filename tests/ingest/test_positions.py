"""Answers' positions in the files themselves: lines and byte columns, for editors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

from spanqa.ingest.loaders import load_file
from spanqa.ingest.positions import FilePosition, file_position


def _locate(path: Path, answer: str, occurrence: int = 0) -> FilePosition:
    text = load_file(path).text
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(answer, start + 1)
    return file_position(path, text, start, start + len(answer))


def test_plain_text_maps_exactly_through_whitespace_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes("Title\r\n\r\n  Café   text here\r\nand the  answer is 42 today.\r\n".encode())
    assert _locate(path, "42") == FilePosition(4, 20)
    assert _locate(path, "text here") == FilePosition(3, 11)  # "  Café   " is 10 bytes: é is two


def test_a_byte_order_mark_is_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + b"The answer is 42.")
    assert _locate(path, "42") == FilePosition(1, 15)
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("The answer is 42.".encode("utf-16"))
    assert _locate(utf16, "42") == FilePosition(1, 29)  # two bytes a character, no BOM counted


def test_the_same_occurrence_in_markdown_and_html(tmp_path: Path) -> None:
    md = tmp_path / "guide.md"
    md.write_text("# Title\n\nSome **bold** text and `work_mem`.\n\nAgain [work_mem](x.html) here.\n")
    assert _locate(md, "work_mem") == FilePosition(3, 25)
    assert _locate(md, "work_mem", occurrence=1) == FilePosition(5, 8)
    assert _locate(md, "bold text") == FilePosition(3, 8)
    html = tmp_path / "page.html"
    html.write_text(
        "<!doctype html><html><body>\n<p>The <b>default</b>\nvalue is <code>4MB</code>.</p>\n</body>"
    )
    assert _locate(html, "default value is 4MB") == FilePosition(2, 11)


def test_files_that_are_not_text_or_are_gone(tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    path.write_text("The answer is here.")
    text = load_file(path).text
    path.unlink()
    assert file_position(path, text, 4, 10) == FilePosition(1, 1)
    path.write_text("Rewritten entirely.")
    assert file_position(path, text, 4, 10) == FilePosition(1, 1)
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4 not really")
    assert file_position(tmp_path / "doc.pdf", text, 4, 10) == FilePosition(1, 1)


def test_a_page_is_shown_by_its_printed_label(tmp_path: Path) -> None:
    from spanqa.ingest.catalog import Catalog
    from spanqa.ingest.positions import Places
    from spanqa.types import Answer, Document, Place

    labelled = Document(
        id="d1",
        path="/docs/manual.pdf",
        relative_path="manual.pdf",
        sha256="x",
        size=1,
        mtime=0.0,
        format="pdf",
        text="Preface text. The limit is 42.",
        page_starts=[(1, 0), (2, 14)],
        page_labels=["xii", "1"],
    )
    unlabelled = Document(
        id="d2",
        path="/docs/other.pdf",
        relative_path="other.pdf",
        sha256="y",
        size=1,
        mtime=0.0,
        format="pdf",
        text="Only text.",
        page_starts=[(1, 0)],
    )
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        catalog.save_indexed(labelled, [])
        catalog.save_indexed(unlabelled, [])
        stored = catalog.get_document("d1")
        assert stored is not None and stored.page_labels == ["xii", "1"]
        places = Places(catalog)
        assert places.describe(labelled.path, "d1", 27, 29, 2) == "/docs/manual.pdf (page 1, PDF page 2)"
        assert places.describe(labelled.path, "d1", 0, 7, 1) == "/docs/manual.pdf (page xii, PDF page 1)"
        assert places.describe(unlabelled.path, "d2", 0, 4, 1) == "/docs/other.pdf (page 1)"
        answer = SimpleNamespace(path=labelled.path, document_id="d1", char_start=27, char_end=29, page=2)
        assert places.of_answer(cast(Answer, answer)) == Place(page_label="1")
