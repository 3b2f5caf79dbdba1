"""Answers' positions in the files themselves: lines and byte columns, for editors."""

from __future__ import annotations

from pathlib import Path

from ingest.loaders import load_file
from ingest.positions import FilePosition, file_position


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
