"""Loaders: every format built in code, detection by content, user-level errors, the normalization map."""

from __future__ import annotations

import itertools
import os
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanqa.ingest.loaders import (
    SUPPORTED_EXTENSIONS,
    LoadedText,
    LoadError,
    detect_format,
    load_file,
    normalize_whitespace,
)
from spanqa.types import page_at

PARAGRAPHS = [
    "Super Bowl 50 was an American football game.",
    "The Denver Broncos defeated the Carolina Panthers 24–10.",
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _make_pdf(path: Path, pages: list[list[str]]) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=True)
    for lines in pages:
        y = 800.0
        for line in lines:
            pdf.drawString(72, y, line)
            y -= 16
        pdf.showPage()
    pdf.save()
    return path


def _make_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Broncos", level=1)
    document.add_paragraph("The Broncos won Super Bowl 50.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Team"
    table.cell(0, 1).text = "Score"
    table.cell(1, 0).text = "Denver"
    table.cell(1, 1).text = "24"
    document.add_paragraph("Peyton   Manning\tretired.")
    document.save(str(path))
    return path


def _assert_pages_consistent(loaded: LoadedText) -> None:
    previous_end = 0
    for number, page in enumerate(loaded.pages, start=1):
        assert page.number == number
        assert previous_end <= page.char_start <= page.char_end <= len(loaded.text)
        previous_end = page.char_end


# -- plain text --------------------------------------------------------------------------------------------


def test_txt_utf8(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.txt", "\n\n\n".join(PARAGRAPHS).encode("utf-8"))
    loaded = load_file(path)
    assert loaded.format == "txt"
    assert loaded.text == "\n\n".join(PARAGRAPHS)
    assert loaded.pages == []
    assert loaded.encoding == "utf-8"


def test_txt_utf8_bom(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.txt", b"\xef\xbb\xbf" + "Zürich café".encode())
    loaded = load_file(path)
    assert loaded.text == "Zürich café"  # no BOM char left over
    assert loaded.encoding == "utf-8-sig"


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_txt_legacy_8bit(tmp_path: Path, encoding: str) -> None:
    text = "Le café est naïve, à l'été. Voilà, déjà vu à Zürich: Grüße."
    path = _write(tmp_path / "a.txt", text.encode(encoding))
    loaded = load_file(path)
    assert loaded.text == text
    assert "café naïve" in load_file(_write(tmp_path / "b.txt", "café naïve".encode(encoding))).text


def test_txt_cp1252_smart_quotes(tmp_path: Path) -> None:
    text = "“Quoted” text – with a dash… and a ‘single’ quote."
    loaded = load_file(_write(tmp_path / "a.txt", text.encode("cp1252")))
    assert loaded.text == text
    assert loaded.encoding == "cp1252"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_txt_utf16(tmp_path: Path, encoding: str) -> None:
    text = "Hello wörld.\r\nThis file is UTF-16 text with a naïve café."
    loaded = load_file(_write(tmp_path / "a.txt", text.encode(encoding)))
    assert loaded.format == "txt"
    assert loaded.text == "Hello wörld.\nThis file is UTF-16 text with a naïve café."
    assert loaded.encoding is not None and loaded.encoding.startswith("utf-16")


def test_txt_cyrillic_cp1251(tmp_path: Path) -> None:
    text = "Москва — столица России, крупнейший по численности населения город страны. " * 5
    loaded = load_file(_write(tmp_path / "a.txt", text.encode("cp1251")))
    assert "Москва — столица России" in loaded.text


def test_txt_mostly_utf8_with_a_bad_byte(tmp_path: Path) -> None:
    data = "Zürich, café, naïve, Grüße, São Paulo, Ελληνικά. ".encode() * 3 + b"broken \xff byte."
    loaded = load_file(_write(tmp_path / "a.txt", data))
    assert loaded.encoding == "utf-8"
    assert loaded.text.startswith("Zürich, café") and loaded.text.endswith("broken \ufffd byte.")


# -- markdown and html ---------------------------------------------------------------------------------------


def test_markdown_markup_removed(tmp_path: Path) -> None:
    source = (
        "---\ntitle: Front matter\n---\n"
        "# The Title\n\n"
        "Some *emphasis*, __strong__ and a [link text](https://example.com) in a\nwrapped paragraph.\n\n"
        "<!-- a hidden comment -->\n\n"
        "## Section\n\n"
        "- item one\n- item two\n\n"
        "```python\nprint('kept')\n    indented()\n```\n\n"
        "Inline `code` stays.\n"
    )
    loaded = load_file(_write(tmp_path / "a.md", source.encode()))
    assert loaded.format == "md"
    text = loaded.text
    assert text.startswith("The Title\n\n")
    assert "Some emphasis, strong and a link text in a wrapped paragraph." in text
    assert "\n\nSection\n\n" in text
    assert "item one\nitem two" in text
    assert "print('kept')\nindented()" in text
    assert "Inline code stays." in text
    for markup in ("#", "*", "__", "](", "https://", "<!--", "hidden comment", "```", "Front matter"):
        assert markup not in text


def test_html_scripts_dropped_blocks_separated(tmp_path: Path) -> None:
    html = """<!DOCTYPE html>
<html><head><title>Page title</title><style>p { color: red; }</style>
<script>var secret = "do not index";</script></head>
<body>
  <h1>Heading</h1>
  <p>First   paragraph
     continues here.</p><p>Second paragraph&nbsp;with&amp;entities.</p>
  <div>Div one</div><div>Div two</div>
  <ul><li>Alpha</li><li>Beta</li></ul>
  <table><tr><td>Cell A</td><td>Cell B</td></tr></table>
  <noscript>Enable JavaScript</noscript>
  <!-- comment -->
  <p>Line<br>break</p>
  <pre>  keep
    code</pre>
</body></html>"""
    loaded = load_file(_write(tmp_path / "page.html", html.encode()))
    text = loaded.text
    assert loaded.format == "html"
    assert text.startswith("Heading\n\nFirst paragraph continues here.\n\nSecond paragraph with&entities.")
    assert "Div one\nDiv two" in text
    assert "Alpha\nBeta" in text
    assert "Cell A\nCell B" in text
    assert "Line\nbreak" in text
    assert "keep\ncode" in text
    for hidden in ("secret", "color", "Page title", "Enable JavaScript", "comment"):
        assert hidden not in text


def test_html_declared_charset(tmp_path: Path) -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>Café naïve</p></body></html>'
    loaded = load_file(_write(tmp_path / "a.htm", html.encode("cp1252")))
    assert loaded.text == "Café naïve"
    assert loaded.encoding == "cp1252"


def test_html_declaring_utf16_in_ascii_bytes(tmp_path: Path) -> None:
    html = '<html><head><meta charset="utf-16"></head><body><p>Plain café</p></body></html>'
    assert load_file(_write(tmp_path / "a.html", html.encode())).text == "Plain café"


# -- pdf -----------------------------------------------------------------------------------------------------


def test_pdf_pages(tmp_path: Path) -> None:
    path = _make_pdf(
        tmp_path / "doc.pdf",
        [
            ["Page one talks about Denver.", "It has two lines."],
            ["Page two mentions Carolina Panthers."],
            ["Page three is about Levi's Stadium."],
        ],
    )
    loaded = load_file(path)
    assert loaded.format == "pdf"
    assert loaded.encoding is None
    assert [p.number for p in loaded.pages] == [1, 2, 3]
    _assert_pages_consistent(loaded)
    for needle, page_index in (("Denver", 0), ("Carolina Panthers", 1), ("Levi's Stadium", 2)):
        start = loaded.text.index(needle)
        span = loaded.pages[page_index]
        assert span.char_start <= start and start + len(needle) <= span.char_end
        assert page_at([(p.number, p.char_start) for p in loaded.pages], start) == page_index + 1
    page2 = loaded.pages[1]
    assert loaded.text[page2.char_start : page2.char_end] == "Page two mentions Carolina Panthers."


def test_pdf_with_empty_page(tmp_path: Path) -> None:
    loaded = load_file(_make_pdf(tmp_path / "doc.pdf", [["First page."], [], ["Third page."]]))
    assert len(loaded.pages) == 3
    _assert_pages_consistent(loaded)
    assert loaded.pages[1].char_start == loaded.pages[1].char_end
    assert loaded.text[loaded.pages[2].char_start : loaded.pages[2].char_end] == "Third page."


def test_pdf_without_text(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^no text found"):
        load_file(_make_pdf(tmp_path / "blank.pdf", [[], []]))


def test_corrupt_pdf(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.pdf", b"%PDF-1.4\n" + os.urandom(2048))
    with pytest.raises(LoadError, match=r"^corrupt PDF: ") as info:
        load_file(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message and len(message) < 200


def test_truncated_pdf(tmp_path: Path) -> None:
    good = _make_pdf(tmp_path / "good.pdf", [["Some text here."]]).read_bytes()
    path = _write(tmp_path / "cut.pdf", good[: len(good) // 3])
    try:
        loaded = load_file(path)  # pypdf may recover part of a truncated file...
    except LoadError as exc:  # ...or report it: either way no exception but LoadError
        assert "\n" not in str(exc)
    else:
        assert loaded.format == "pdf"


def test_pdf_with_pdf_suffix_but_garbage(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^corrupt PDF"):
        load_file(_write(tmp_path / "fake.pdf", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4))


def test_encrypted_pdf(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = _make_pdf(tmp_path / "plain.pdf", [["Secret text."]])
    for password, name in (("secret", "locked.pdf"), ("", "open.pdf")):
        writer = PdfWriter()
        for page in PdfReader(plain).pages:
            writer.add_page(page)
        writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
        with (tmp_path / name).open("wb") as handle:
            writer.write(handle)
    with pytest.raises(LoadError, match=r"^encrypted PDF"):
        load_file(tmp_path / "locked.pdf")
    assert load_file(tmp_path / "open.pdf").text == "Secret text."


# -- docx ----------------------------------------------------------------------------------------------------


def test_docx(tmp_path: Path) -> None:
    loaded = load_file(_make_docx(tmp_path / "a.docx"))
    assert loaded.format == "docx"
    assert loaded.pages == []
    blocks = [
        "Broncos",
        "The Broncos won Super Bowl 50.",
        "Team",
        "Score",
        "Denver",
        "24",
        "Peyton Manning retired.",
    ]
    assert loaded.text == "\n\n".join(blocks)


def test_corrupt_docx(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^corrupt DOCX"):
        load_file(_write(tmp_path / "a.docx", b"not a zip at all, just text"))
    with zipfile.ZipFile(tmp_path / "b.docx", "w") as archive:
        archive.writestr("word/document.xml", "<w:document><unclosed>")
    with pytest.raises(LoadError, match=r"^corrupt DOCX"):
        load_file(tmp_path / "b.docx")


def test_legacy_doc_named_docx(tmp_path: Path) -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    with pytest.raises(LoadError, match=r"^not a \.docx file"):
        load_file(_write(tmp_path / "a.docx", ole))


# -- detection by content ------------------------------------------------------------------------------------


def test_pdf_named_txt_is_read_as_pdf(tmp_path: Path) -> None:
    pdf = _make_pdf(tmp_path / "x.pdf", [["Hidden PDF text."]])
    path = _write(tmp_path / "notes.txt", pdf.read_bytes())
    loaded = load_file(path)
    assert loaded.format == "pdf"
    assert loaded.text == "Hidden PDF text."


def test_html_named_txt_is_read_as_html(tmp_path: Path) -> None:
    path = _write(tmp_path / "page.txt", b"<!doctype html><html><body><p>One</p><p>Two</p></body></html>")
    loaded = load_file(path)
    assert loaded.format == "html"
    assert loaded.text == "One\n\nTwo"


def test_docx_named_otherwise_is_read_as_docx(tmp_path: Path) -> None:
    docx_bytes = _make_docx(tmp_path / "a.docx").read_bytes()
    path = _write(tmp_path / "report.txt", docx_bytes)
    assert detect_format(path, docx_bytes[:8192]) == "docx"
    assert load_file(path).format == "docx"


def test_markdown_mentioning_html_stays_markdown(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "a.md", b"# About HTML\n\nEvery page starts with `<html>` and ends with `</html>`.\n"
    )
    assert load_file(path).format == "md"


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
        + bytes(64),
        os.urandom(4096),
        b"text at first, then\x00\x01\x02\x03 binary" * 50,
    ],
    ids=["png", "random", "nul-bytes"],
)
def test_binary_named_txt(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path / "image.txt", data)
    assert detect_format(path, data[:8192]) is None
    with pytest.raises(LoadError, match=r"^binary file$"):
        load_file(path)


def test_other_zip_is_not_docx(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "a.txt", "w") as archive:
        archive.writestr("content.xml", "<x/>")
    with pytest.raises(LoadError, match=r"^binary file$"):
        load_file(tmp_path / "a.txt")


def test_detect_by_extension() -> None:
    assert detect_format(Path("a.TXT"), b"plain") == "txt"
    assert detect_format(Path("a.markdown"), b"# md") == "md"
    assert detect_format(Path("a.htm"), b"<p>x</p>") == "html"
    assert detect_format(Path("a.rst"), b"Title\n=====") == "txt"
    assert detect_format(Path("a.xyz"), b"plain text") == "txt"  # text of any other type is plain text
    assert detect_format(Path("a.xyz"), b"\x00\x01binary") is None
    assert detect_format(Path("a.xyz"), b"%PDF-1.7\n") == "pdf"
    assert {".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx"} <= SUPPORTED_EXTENSIONS


def test_text_of_any_extension_loads_as_plain_text(tmp_path: Path) -> None:
    loaded = load_file(_write(tmp_path / "a.xyz", b"plain text"))
    assert loaded.format == "txt" and loaded.text == "plain text"
    with pytest.raises(LoadError, match=r"^binary file$"):
        load_file(_write(tmp_path / "b.xyz", bytes(range(256))))


# -- user-level errors ---------------------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^empty file$"):
        load_file(_write(tmp_path / "a.txt", b""))


@pytest.mark.parametrize("name", ["a.txt", "a.md", "a.html"])
def test_whitespace_only(tmp_path: Path, name: str) -> None:
    with pytest.raises(LoadError, match=r"^no text found$"):
        load_file(_write(tmp_path / name, b" \n\t\r\n \xc2\xa0 \n"))


def test_html_without_text(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^no text found$"):
        load_file(_write(tmp_path / "a.html", b"<html><head><script>x()</script></head><body></body></html>"))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^file not found$"):
        load_file(tmp_path / "missing.txt")
    with pytest.raises(LoadError, match=r"^is a directory$"):
        load_file(tmp_path)


def test_fifo_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    with pytest.raises(LoadError, match=r"^not a regular file$"):
        load_file(path)


def test_permission_denied(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read a chmod 000 file")
    path = _write(tmp_path / "secret.txt", b"hidden")
    path.chmod(0)
    try:
        with pytest.raises(LoadError, match=r"^permission denied$"):
            load_file(path)
    finally:
        path.chmod(0o600)


def test_too_large_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.txt"
    with path.open("wb") as handle:
        handle.truncate(50_000_000)  # sparse: no disk used

    def refuse_open(self: Path, *args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(Path, "open", refuse_open)
    with pytest.raises(LoadError) as info:
        load_file(path, max_bytes=25_000_000)
    assert str(info.value) == "too large (50.0 MB > 25 MB limit; raise SPANQA_MAX_FILE_MB)"


def test_max_bytes_allows_small_files(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.txt", b"0123456789")
    assert load_file(path, max_bytes=10).text == "0123456789"
    with pytest.raises(LoadError, match=r"^too large"):
        load_file(path, max_bytes=9)


# -- normalize_whitespace ------------------------------------------------------------------------------------


def test_normalize_examples() -> None:
    source = "  Hello,\u00a0\u00a0world!\t \r\n\r\n\r\n\r\nNext   para \r line\u2028end \n\n "
    normalized, index = normalize_whitespace(source)
    assert normalized == "Hello, world!\n\nNext para\nline\nend"
    assert len(index) == len(normalized)
    assert all(source[j] == normalized[i] for i, j in enumerate(index) if not normalized[i].isspace())
    assert normalize_whitespace("") == ("", [])
    assert normalize_whitespace(" \n\t ") == ("", [])
    assert normalize_whitespace("a\n \n b") == ("a\n\nb", [0, 1, 3, 5])


_WHITESPACE = [" ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u2003", "\u3000", "\x0b", "\x0c", "\u2028", "\x85"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_WHITESPACE), st.text(min_size=1, max_size=4))).map("".join))
def test_normalize_properties(text: str) -> None:
    normalized, index = normalize_whitespace(text)
    assert len(index) == len(normalized)
    assert all(a < b for a, b in itertools.pairwise(index))
    for i, ch in enumerate(normalized):
        if ch.isspace():
            assert ch in " \n"
            assert text[index[i]].isspace()
        else:
            assert text[index[i]] == ch
    assert "  " not in normalized
    assert "\n\n\n" not in normalized
    assert " \n" not in normalized and "\n " not in normalized
    assert normalized == normalized.strip()
    assert "".join(text.split()) == "".join(normalized.split())  # no non-whitespace char lost or added
    assert normalize_whitespace(normalized)[0] == normalized


MAN_PAGE = """GREP(1)                          User Commands                         GREP(1)

OPTIONS
       -v, --invert-match
              Invert the sense of matching, to select non-matching lines.

       -c, --count
              Suppress normal output; instead print a count of matching lines
              for  each  input  file.   With the -v or --invert-match option
              (see below), count non-matching lines.

       Files are read in this order:
       - the first file named on the command line, then the next ones
       - standard input
"""


def test_hard_wrapped_text_is_unwrapped_with_offsets_kept(tmp_path: Path) -> None:
    loaded = load_file(_write(tmp_path / "grep.1.txt", MAN_PAGE.encode()))
    normalized, _ = normalize_whitespace(MAN_PAGE)
    assert len(loaded.text) == len(normalized)  # one space for each joined break: offsets unchanged
    assert [a for a, b in zip(loaded.text, normalized, strict=True) if a != b] == [" "] * 2
    assert (
        "matching lines for each input file. With the -v or --invert-match option (see below)" in loaded.text
    )
    # Short lines keep their breaks: a term and its description, a list and its items, a heading.
    assert "-v, --invert-match\nInvert the sense" in loaded.text
    assert "in this order:\n- the first file" in loaded.text and "ones\n- standard input" in loaded.text
    assert "GREP(1)\n\nOPTIONS\n-v" in loaded.text


def test_pdf_lines_are_unwrapped(tmp_path: Path) -> None:
    lines = [
        "The Denver Broncos defeated the Carolina Panthers in Super Bowl 50, which",
        "was played on February 7, 2016, at Levi's Stadium in Santa Clara, California,",
        "the home of the San Francisco 49ers.",
        "Short line one",
        "Short line two",
    ]
    loaded = load_file(_make_pdf(tmp_path / "wrapped.pdf", [lines]))
    assert "Super Bowl 50, which was played on February 7, 2016, at Levi's Stadium" in loaded.text
    assert "San Francisco 49ers.\nShort line one\nShort line two" in loaded.text


def test_markdown_and_code_keep_their_lines(tmp_path: Path) -> None:
    source = "Intro text that is long enough to look like a wrapped paragraph of prose\n\n"
    source += "```\n" + "a line of code that is long enough to look like wrapped prose text\n" * 3 + "```\n"
    loaded = load_file(_write(tmp_path / "code.md", source.encode()))
    assert loaded.text.count("prose text\na line of code") == 2


def test_one_very_long_line_loads(tmp_path: Path) -> None:
    # Guards the unwrapping's paragraph scan: a pattern that must backtrack over a line takes hours here.
    line = "The Denver Broncos defeated the Carolina Panthers at Levi's Stadium. " * 5000
    loaded = load_file(_write(tmp_path / "one-line.txt", line.encode()))
    assert loaded.text == line.strip()


def test_pdf_running_headers_and_footers_stay_out_of_passages(tmp_path: Path) -> None:
    from spanqa.ingest.chunker import chunk_blocks
    from spanqa.ingest.loaders import RUNNING, running_lines

    pages = []
    for number in range(1, 7):
        body = [f"Section {number} says the limit is {number * 100} connections for this server."]
        if number == 3:
            body.append("1 A footnote that opens with its number at the bottom of the page.")
        chapter = "Chapter 1: Limits" if number < 4 else "Chapter 2: Timeouts"
        pages.append([f"{chapter} {number + 10}", *body, "The Frob Manual"])
    loaded = load_file(_make_pdf(tmp_path / "manual.pdf", pages))
    running = {loaded.text[a:b] for a, b in running_lines(loaded.text, loaded.pages)}
    assert "Chapter 1: Limits 11" in running and "Chapter 2: Timeouts 16" in running
    assert "The Frob Manual" in running
    assert not any("footnote" in line or "connections" in line for line in running)
    nav = [b for b in loaded.blocks if b.kind == RUNNING]
    assert len(nav) == 12  # a header and a footer on each of the six pages
    # The numbers the headers print are the pages' labels (the PDF declares none).
    assert [p.label for p in loaded.pages] == ["11", "12", "13", "14", "15", "16"]
    # The text is unchanged (offsets still index it); the passages never hold a running line.
    assert "Chapter 2: Timeouts 14" in loaded.text

    class Words:  # a tokenizer of whitespace words is all the chunker needs
        def __call__(self, texts, **_: object) -> dict[str, list[list[tuple[int, int]]]]:
            import re

            return {"offset_mapping": [[m.span() for m in re.finditer(r"\S+", t)] for t in texts]}

    for span in chunk_blocks(loaded.text, loaded.blocks, Words(), chunk_tokens=40, overlap_tokens=5):
        piece = loaded.text[span.char_start : span.char_end]
        assert "Chapter" not in piece and "Frob Manual" not in piece


def test_a_loader_version_recuts_only_its_format() -> None:
    from spanqa.ingest.chunker import chunking_signature
    from spanqa.ingest.loaders import LOADER_VERSIONS

    assert chunking_signature(256, 48, "html") == chunking_signature(256, 48) == "v1:256/48"
    assert chunking_signature(256, 48, "pdf") == f"v1:256/48:pdf{LOADER_VERSIONS['pdf']}"


def test_pdf_page_labels_the_file_declares(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter
    from pypdf.constants import PageLabelStyle

    plain = _make_pdf(tmp_path / "plain.pdf", [[f"Page {n} text about the server."] for n in range(4)])
    assert all(p.label is None for p in load_file(plain).pages)  # no labels, no printed numbers: unknown
    writer = PdfWriter()
    for page in PdfReader(plain).pages:
        writer.add_page(page)
    writer.set_page_label(0, 1, style=PageLabelStyle.LOWERCASE_ROMAN)
    writer.set_page_label(2, 3, style=PageLabelStyle.DECIMAL, start=1)
    labelled = tmp_path / "labelled.pdf"
    with labelled.open("wb") as handle:
        writer.write(handle)
    loaded = load_file(labelled)
    assert [(p.number, p.label) for p in loaded.pages] == [(1, "i"), (2, "ii"), (3, "1"), (4, "2")]


def test_pdf_words_broken_at_line_ends_read_whole() -> None:
    from spanqa.ingest.loaders.pdf import plain_page_texts

    pages = [
        "The server reads its configu-\nration at start.\nUse the command-\nline tool, as the command-line\n"
        "guide says; see Apache-\nStyle rules and the 2-\nstep setup.\nA soft hy\u00ad\nphen, the \ufb01le "
        "and e\ufb03cient\u00a0code.\nA whole line: configu-\nration\nnext line."
    ]
    (text,) = plain_page_texts(pages)
    assert "its configuration\nat start." in text  # joined, the break moved after the word
    assert "command-line\ntool" in text  # the document writes it with its hyphen elsewhere
    assert "Apache-Style\nrules" in text and "2-step" in text  # a capital or a digit keeps the hyphen
    assert "soft hyphen," in text and "the file and efficient code." in text
    assert "A whole line: configuration\nnext line." in text  # no blank line (a paragraph break) appears
    assert "\u00ad" not in text and "\ufb01" not in text


def test_pdf_hyphenation_and_ligatures_from_a_real_file(tmp_path: Path) -> None:
    pdf = _make_pdf(
        tmp_path / "manual.pdf",
        [["The daemon rereads its configu-", "ration when it gets SIGHUP, and the", "pidfile is kept."]],
    )
    text = load_file(pdf).text
    assert "rereads its configuration when it gets SIGHUP" in " ".join(text.split())


def test_a_pdf_whose_every_page_is_only_a_header(tmp_path: Path) -> None:
    from spanqa.ingest.chunker import chunk_blocks

    pages = [[f"The Frob Manual {n}", f"Chapter 1 {n}"] for n in range(1, 6)]
    loaded = load_file(_make_pdf(tmp_path / "headers.pdf", pages))
    assert all(loaded.text[p.char_start : p.char_end] for p in loaded.pages)

    class Words:
        def __call__(self, texts, **_: object) -> dict[str, list[list[tuple[int, int]]]]:
            import re

            return {"offset_mapping": [[m.span() for m in re.finditer(r"\S+", t)] for t in texts]}

    for span in chunk_blocks(loaded.text, loaded.blocks, Words(), chunk_tokens=40, overlap_tokens=5):
        assert loaded.text[span.char_start : span.char_end].strip()  # exact, non-empty slices only


def test_pdf_without_bookmarks_takes_its_headings_from_type_size(tmp_path: Path) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from spanqa.ingest.loaders import HEADING, TEXT

    path = tmp_path / "sized.pdf"
    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=True)
    for page, (chapter, sections) in enumerate([("Installing Frob", ["Requirements", "Upgrades"])], 1):
        y = 800.0
        pdf.setFont("Helvetica-Bold", 20)
        pdf.drawString(72, y, chapter)
        y -= 30
        for section in sections:
            pdf.setFont("Helvetica-Bold", 14)
            pdf.drawString(72, y, section)
            y -= 20
            pdf.setFont("Helvetica", 10)
            for n in range(6):
                pdf.drawString(72, y, f"{section} body line {n} on page {page} says the port is {8000 + n}.")
                y -= 14
        pdf.showPage()
    pdf.save()
    loaded = load_file(path)
    headings = [loaded.text[b.char_start : b.char_end] for b in loaded.blocks if b.kind == HEADING]
    assert headings == ["Installing Frob", "Requirements", "Upgrades"]
    texts = [b for b in loaded.blocks if b.kind == TEXT]
    assert [b.heading for b in texts] == [
        ("Installing Frob", "Requirements"),
        ("Installing Frob", "Upgrades"),
    ]
    assert "Upgrades body line 0" in loaded.text[texts[1].char_start : texts[1].char_end]
    # Offsets still index the text, and a document in one size has no headings.
    plain = load_file(_make_pdf(tmp_path / "plain.pdf", [["Just one size here.", "And another line."]]))
    assert not [b for b in plain.blocks if b.kind == HEADING]


def _two_column_pdf(path: Path, left: list[str], right: list[str], *, right_x: float = 310) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=True)
    pdf.setFont("Helvetica", 10)
    pdf.drawString(50, 800, "The Frob Manual")
    y = 760.0
    for a, b in zip(left, right, strict=True):  # drawn row by row: pypdf alone reads across the columns
        pdf.drawString(50, y, a)
        pdf.drawString(right_x, y, b)
        y -= 14
    pdf.drawString(290, 40, "7")
    pdf.showPage()
    pdf.save()
    return path


def test_a_two_column_pdf_page_is_read_column_by_column(tmp_path: Path) -> None:
    left = [f"left column sentence {n} runs on about the daemon and its" for n in range(12)]
    right = [f"right column sentence {n} runs on about the client and" for n in range(12)]
    text = load_file(_two_column_pdf(tmp_path / "two.pdf", left, right)).text
    body = " ".join(text.split())
    assert body.startswith("The Frob Manual left column") and body.endswith("client and 7")  # header, footer
    assert body.index(left[-1]) < body.index(right[0])  # the whole left column, then the right one
    assert all(body.index(a) < body.index(b) for a, b in itertools.pairwise(left + right))


def test_a_two_column_table_stays_row_by_row(tmp_path: Path) -> None:
    terms = [f"-{chr(97 + n)}" for n in range(12)]
    descriptions = [f"turn on option {n} for every file read" for n in range(12)]
    text = load_file(_two_column_pdf(tmp_path / "table.pdf", terms, descriptions)).text
    body = " ".join(text.split())
    assert all(f"{t} {d}" in body or f"{t}\n{d}" in text for t, d in zip(terms, descriptions, strict=True))


def test_docx_pages_from_its_page_breaks(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Setup", level=1)
    document.add_paragraph("The daemon listens on port 8080 by default.")
    document.add_page_break()
    document.add_paragraph("Logs rotate every 7 days.")
    document.add_page_break()
    document.add_paragraph("Backups run at 02:00.")
    path = tmp_path / "manual.docx"
    document.save(str(path))
    loaded = load_file(path)
    _assert_pages_consistent(loaded)
    assert [p.number for p in loaded.pages] == [1, 2, 3]
    for answer, page in (("8080", 1), ("7 days", 2), ("02:00", 3)):
        start = loaded.text.index(answer)
        assert next(p.number for p in loaded.pages if p.char_start <= start < p.char_end) == page
    # Where Word recorded its own layout, those breaks count (they follow the typed ones too).
    from docx.oxml import OxmlElement

    runs = document.paragraphs[-1].runs
    runs[0]._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    document.save(str(path))
    assert [p.number for p in load_file(path).pages] == [1, 2]
