"""Hostile input for every loader and the chunker: random bytes under every extension, text made of what
breaks text handling (NUL, invalid UTF-8, lone surrogates, RTL and combining marks, zero-width characters),
deep nesting, a zip bomb named .docx, a PDF with a broken xref. Each file either loads, with every block and
chunk an exact slice of its text, or fails with a one-line LoadError; nothing else escapes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanqa.ingest.chunker import chunk_blocks
from spanqa.ingest.loaders import LoadedText, LoadError, load_file

EXTENSIONS = [
    "",
    ".txt",
    ".md",
    ".html",
    ".pdf",
    ".docx",
    ".rst",
    ".csv",
    ".json",
    ".1",
    ".8.gz",
    ".epub",
    ".odt",
]
HOSTILE = [
    "\x00",
    "\ufeff",
    "\u200b",  # zero-width space
    "\u200d",  # zero-width joiner
    "\u202e",  # right-to-left override
    "\u05d0\u05d1\u05d2",  # Hebrew
    "\u0627\u0644\u0639",  # Arabic
    "e\u0301\u0301\u0301",  # stacked combining marks
    "\\ud800",  # a lone surrogate, escaped (as JSON or source code would hold it)
    "&#xD800;",
    "\r\n",
    "\r",
    "\u2028",
    "<",
    "</p>",
    "<table><tr><td>",
    "# ",
    "```",
    "\t",
    "%PDF-",
    "PK\x03\x04",
    "\n.TH X 1\n",
    "\n.SH ",
    "\n.TP\n",
    "\\fB",
    "\\(",
    "\\*[",
    "\n.It Xo\n",
    "\n.Bl -tag\n",
    "\n.de X\n",
    "\n.TS\n",
    "\n.nf\n",
]
TEXT = st.lists(
    st.one_of(
        st.sampled_from(HOSTILE),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    ),
    max_size=60,
).map("".join)


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def _check(loaded: LoadedText, tokenizer: Any) -> None:
    text = loaded.text
    assert text and text == text.strip()
    previous = 0
    for block in loaded.blocks:
        assert previous <= block.char_start < block.char_end <= len(text)
        previous = block.char_end
    for page in loaded.pages:
        assert 0 <= page.char_start <= page.char_end <= len(text)
    for span in chunk_blocks(text, loaded.blocks, tokenizer, chunk_tokens=24, overlap_tokens=6):
        piece = text[span.char_start : span.char_end]
        assert piece and piece == piece.strip()  # the offset invariant: a chunk is a slice of the text
        for start, end in span.segments:
            assert span.char_start <= start < end <= span.char_end or span.title_start is not None


def _load(path: Path, tokenizer: Any) -> None:
    try:
        loaded = load_file(path, max_bytes=2_000_000)
    except LoadError as exc:
        assert str(exc) and "\n" not in str(exc) and "Traceback" not in str(exc)
        return
    _check(loaded, tokenizer)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=3000), extension=st.sampled_from(EXTENSIONS))
def test_random_bytes_under_any_name(tmp_path: Path, tokenizer: Any, data: bytes, extension: str) -> None:
    path = tmp_path / f"fuzz{extension}"
    path.write_bytes(data)
    _load(path, tokenizer)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    text=TEXT,
    extension=st.sampled_from([".txt", ".md", ".html", ""]),
    encoding=st.sampled_from(["utf-8", "utf-16", "latin-1"]),
)
def test_hostile_text(tmp_path: Path, tokenizer: Any, text: str, extension: str, encoding: str) -> None:
    path = tmp_path / f"hostile{extension}"
    path.write_bytes(text.encode(encoding, errors="replace"))
    _load(path, tokenizer)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=TEXT, gzipped=st.booleans())
def test_hostile_man_pages(tmp_path: Path, tokenizer: Any, text: str, gzipped: bool) -> None:
    """Unbalanced macros, stray escapes, an unclosed .de or .TS: exact slices or a one-line LoadError."""
    import gzip

    data = (".TH FUZZ 1\n" + text).encode("utf-8", errors="replace")
    path = tmp_path / ("fuzz.1.gz" if gzipped else "fuzz.1")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    _load(path, tokenizer)


def test_deeply_nested_html_and_markdown(tmp_path: Path, tokenizer: Any) -> None:
    html = tmp_path / "deep.html"
    html.write_text("<html><body>" + "<div>" * 50_000 + "deep text" + "</div>" * 50_000 + "</body></html>")
    _load(html, tokenizer)
    md = tmp_path / "deep.md"
    md.write_text("> " * 5_000 + "quoted\n" + "- " * 2_000 + "item\n")
    _load(md, tokenizer)


def test_a_zip_bomb_named_docx(tmp_path: Path) -> None:
    import docx

    real = tmp_path / "real.docx"
    document = docx.Document()
    document.add_paragraph("The Broncos won.")
    document.save(str(real))
    # The same package with its document.xml replaced by 300 MB of one paragraph: small on disk.
    buffer = io.BytesIO()
    with zipfile.ZipFile(real) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            if item.filename == "word/document.xml":
                with bomb.open(item.filename, "w", force_zip64=True) as out:
                    block = b"<!--" + b"A" * 1_000_000 + b"-->"
                    for _ in range(300):
                        out.write(block)
            else:
                bomb.writestr(item, source.read(item.filename))
    path = tmp_path / "bomb.docx"
    path.write_bytes(buffer.getvalue())
    assert path.stat().st_size < 2_000_000
    with pytest.raises(LoadError, match=r"unpacks to 30\d MB \(more than 200 MB\)"):
        load_file(path, max_bytes=20_000_000)
    assert load_file(real).text == "The Broncos won."  # a real one still loads


def test_a_pdf_with_a_broken_xref(tmp_path: Path, tokenizer: Any) -> None:
    from reportlab.pdfgen import canvas

    good = tmp_path / "good.pdf"
    pdf = canvas.Canvas(str(good), invariant=True)
    pdf.drawString(72, 800, "The Broncos won Super Bowl 50.")
    pdf.showPage()
    pdf.save()
    data = good.read_bytes()
    start = data.rindex(b"startxref")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(data[:start] + b"startxref\n999999\n%%EOF\n")  # the xref offset points nowhere
    _load(broken, tokenizer)
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(data[: len(data) // 2])
    _load(truncated, tokenizer)


def test_one_hundred_thousand_characters_on_one_line(tmp_path: Path, tokenizer: Any) -> None:
    path = tmp_path / "line.txt"
    path.write_text("word\u200b " * 20_000)
    _load(path, tokenizer)
