"""Loaders keep the document's structure (blocks with heading paths) and the chunker follows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanqa.ingest.chunker import HEADING_SEPARATOR, chunk_blocks
from spanqa.ingest.loaders import Block, LoadedText, load_file

MANUAL = """<!doctype html><html><body>
<nav><a href="/">Home</a> <a href="/next">Next</a></nav>
<h1>Server Configuration</h1>
<h2>Resource Consumption<a class="headerlink" href="#rc">¶</a></h2>
<h3>Memory</h3>
<dl>
<dt>work_mem (integer)</dt>
<dd><p>Sets the base maximum amount of memory to be used by a query operation. The default value is four
megabytes (4MB).</p></dd>
<dt>maintenance_work_mem (integer)</dt>
<dd><p>Specifies the maximum amount of memory to be used by maintenance operations. It defaults to 64
megabytes (64MB).</p><ul><li>VACUUM</li><li>CREATE INDEX</li></ul></dd>
</dl>
<h3>Numeric Types</h3>
<table>
<thead><tr><th>Name</th><th>Storage Size</th></tr></thead>
<tbody><tr><td>smallint</td><td>2 bytes</td></tr><tr><td>integer</td><td>4 bytes</td></tr></tbody>
</table>
<h2>Examples</h2>
<pre>CREATE INDEX ON films USING btree
  (title);</pre>
<p>column_name is the name of a column.</p>
</body></html>"""


def _blocks(loaded: LoadedText) -> list[tuple[str, tuple[str, ...], str]]:
    return [(b.kind, b.heading, loaded.text[b.char_start : b.char_end]) for b in loaded.blocks]


def _check_blocks(loaded: LoadedText) -> None:
    """Blocks are trimmed, non-empty, in order and never overlap."""
    end = 0
    for block in loaded.blocks:
        piece = loaded.text[block.char_start : block.char_end]
        assert piece and piece == piece.strip() and block.char_start >= end
        end = block.char_end


def test_html_headings_definitions_tables_code_and_navigation(tmp_path: Path) -> None:
    path = tmp_path / "config.html"
    path.write_text(MANUAL, encoding="utf-8")
    loaded = load_file(path)
    _check_blocks(loaded)
    blocks = _blocks(loaded)
    memory = ("Server Configuration", "Resource Consumption", "Memory")
    assert ("nav", (), "Home Next") in blocks
    assert ("heading", ("Server Configuration",), "Resource Consumption¶") in blocks
    assert ("term", (*memory, "work_mem (integer)"), "work_mem (integer)") in blocks
    work_mem = next(b for b in blocks if b[2].startswith("Sets the base"))
    assert work_mem[:2] == ("text", (*memory, "work_mem (integer)"))
    assert ("item", (*memory, "maintenance_work_mem (integer)"), "CREATE INDEX") in blocks
    types = ("Server Configuration", "Resource Consumption", "Numeric Types")
    assert ("header", types, "Name\nStorage Size") in blocks
    assert ("row", (*types, "Name | Storage Size"), "smallint\n2 bytes") in blocks
    code = next(b for b in blocks if b[0] == "code")
    assert code[1] == ("Server Configuration", "Examples") and "btree\n(title);" in code[2]


def test_a_term_of_several_lines_names_one_entry(tmp_path: Path, tokenizer: Any) -> None:
    """PostgreSQL's manual writes an option's short and long names in one <dt>, split by <br>."""
    path = tmp_path / "app-pgdump.html"
    path.write_text(
        "<h2>Options</h2><dl>"
        '<dt><span class="term"><code>-a</code><br /></span><span class="term"><code>--data-only</code>'
        "</span></dt><dd><p>Dump only the data, not the schema.</p></dd>"
        "<dt><span class='term'><code>-b</code><br /></span>"
        "<span class='term'><code>--blobs</code></span></dt>"
        "<dd><p>Include large objects in the dump.</p></dd></dl>",
        encoding="utf-8",
    )
    loaded = load_file(path)
    blocks = _blocks(loaded)
    entry = ("Options", "-a, --data-only")
    assert [b for b in blocks if b[1] == entry] == [
        ("term", entry, "-a"),
        ("term", entry, "--data-only"),
        ("text", entry, "Dump only the data, not the schema."),
    ]
    assert ("text", ("Options", "-b, --blobs"), "Include large objects in the dump.") in blocks
    # A list nested in an entry (a table of contents) is not a second line of the entry's term.
    path.write_text("<dl><dt>Chapter 1</dt><dd><dl><dt>Section 1.1</dt></dl></dd></dl><p>Body.</p>")
    nested = _blocks(load_file(path))
    assert nested[:2] == [
        ("term", ("Chapter 1",), "Chapter 1"),
        ("term", ("Chapter 1", "Section 1.1"), "Section 1.1"),
    ]
    # The names open the entry's passage, answerable there ("Which option dumps only the data?").
    spans = chunk_blocks(loaded.text, loaded.blocks, tokenizer, chunk_tokens=50, overlap_tokens=5)
    first = next(s for s in spans if "Dump only" in loaded.text[s.char_start : s.char_end])
    assert loaded.text[first.char_start : first.char_end].startswith("-a\n--data-only")


def test_markdown_headings_lists_tables_and_fences(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(
        "# Guide\n\nIntro.\n\n## Install\n\n- step one\n- step two\n\n"
        "| Option | Default |\n|---|---|\n| --jobs | 4 |\n\n```sh\nmake install\n```\n",
        encoding="utf-8",
    )
    loaded = load_file(path)
    _check_blocks(loaded)
    blocks = _blocks(loaded)
    assert ("heading", (), "Guide") in blocks
    assert ("text", ("Guide",), "Intro.") in blocks
    assert ("item", ("Guide", "Install"), "step two") in blocks
    assert ("row", ("Guide", "Install", "Option | Default"), "--jobs\n4") in blocks
    assert ("code", ("Guide", "Install"), "make install") in blocks


def test_docx_headings(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Handbook", level=0)
    document.add_heading("Leave", level=1)
    document.add_paragraph("Employees get 27 days of paid vacation.")
    document.add_heading("Sick leave", level=2)
    document.add_paragraph("Sick days are paid in full.")
    document.add_heading("Offices", level=1)
    document.add_paragraph("Berlin opens at nine.")
    path = tmp_path / "handbook.docx"
    document.save(str(path))
    loaded = load_file(path)
    _check_blocks(loaded)
    texts = {text: (kind, heading) for kind, heading, text in _blocks(loaded)}
    assert texts["Employees get 27 days of paid vacation."] == ("text", ("Handbook", "Leave"))
    assert texts["Sick days are paid in full."] == ("text", ("Handbook", "Leave", "Sick leave"))
    assert texts["Berlin opens at nine."] == ("text", ("Handbook", "Offices"))


def test_pdf_pages_titled_by_bookmarks(tmp_path: Path) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path = tmp_path / "manual.pdf"
    pdf = canvas.Canvas(str(path), pagesize=A4)
    for number, (title, body) in enumerate(
        [("Introduction", "spanqa answers questions."), ("Install", "Run the install script.")], start=1
    ):
        pdf.bookmarkPage(f"p{number}")
        pdf.addOutlineEntry(title, f"p{number}", level=0)
        pdf.drawString(72, 750, body)
        pdf.showPage()
    pdf.save()
    loaded = load_file(path)
    _check_blocks(loaded)
    assert [(b.heading, loaded.text[b.char_start : b.char_end]) for b in loaded.blocks] == [
        (("Introduction",), "spanqa answers questions."),
        (("Install",), "Run the install script."),
    ]


def test_plain_text_titles_and_man_page_sections(tmp_path: Path) -> None:
    path = tmp_path / "grep.txt"
    path.write_text(
        "grep manual\n\nIntroduction text.\n\nOPTIONS\n\n"
        "-v, --invert-match\n    Invert the sense of matching.\n\nNotes\n=====\n\nA note.",
        encoding="utf-8",
    )
    loaded = load_file(path)
    _check_blocks(loaded)
    texts = {text: (kind, heading) for kind, heading, text in _blocks(loaded)}
    assert texts["Introduction text."] == ("text", ("grep manual",))
    assert texts["-v, --invert-match\nInvert the sense of matching."] == ("text", ("grep manual", "OPTIONS"))
    assert texts["A note."] == ("text", ("Notes",))


# -- the chunker -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_bert_dir))


def test_chunks_follow_sections_and_carry_heading_paths(tmp_path: Path, tokenizer: Any) -> None:
    path = tmp_path / "config.html"
    path.write_text(MANUAL, encoding="utf-8")
    loaded = load_file(path)
    chunks = chunk_blocks(loaded.text, loaded.blocks, tokenizer, chunk_tokens=200, overlap_tokens=20)
    texts = [loaded.text[c.char_start : c.char_end] for c in chunks]
    headings = [c.heading for c in chunks]
    # Each parameter's entry is a passage of its own, opened by its name: the next entry never joins it.
    work_mem = texts.index(next(t for t in texts if t.startswith("work_mem (integer)\n\nSets the base")))
    assert "maintenance" not in texts[work_mem]
    assert headings[work_mem] == "Server Configuration > Resource Consumption > Memory"
    small = chunk_blocks(loaded.text, loaded.blocks, tokenizer, chunk_tokens=12, overlap_tokens=0)
    cut = [c for c in small if loaded.text[c.char_start : c.char_end].startswith("Sets the")]
    # A later piece of the entry: its term, where it stands in the text, is its title.
    assert cut and cut[0].title and loaded.text[cut[0].title[0] : cut[0].title[1]] == "work_mem (integer)"
    assert cut[0].heading == "Server Configuration > Resource Consumption > Memory"
    # Table rows are passages of their own, each with the column headers in its heading path.
    assert "smallint\n2 bytes" in texts and "integer\n4 bytes" in texts
    assert headings[texts.index("smallint\n2 bytes")].endswith("Numeric Types > Name | Storage Size")
    # Headings, terms, header rows and navigation are never chunk text.
    assert not any(t.startswith(("Home", "Server Configuration", "Memory", "Name")) for t in texts)
    for chunk, text in zip(chunks, texts, strict=True):
        assert chunk.segments and all(chunk.char_start <= a < b <= chunk.char_end for a, b in chunk.segments)
        assert text == text.strip()


_WORDS = st.sampled_from(["alpha", "beta", "gamma.", "delta", "epsilon!", "zeta", "eta?", "theta", "iota"])
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=12).map(" ".join)
_BLOCK = st.tuples(
    st.sampled_from(["text", "item", "row", "code", "heading", "term", "nav"]),
    st.lists(_SENTENCE, min_size=1, max_size=6).map(" ".join),
    st.sampled_from([(), ("A",), ("A", "B"), ("C",)]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_BLOCK, min_size=1, max_size=12), size=st.integers(4, 40))
def test_chunk_offsets_segments_and_heading_prefixes_hold(
    parts: list[tuple[str, str, tuple[str, ...]]], size: int, tokenizer: Any
) -> None:
    from spanqa.reader.answers import reader_input
    from spanqa.types import Passage

    text, blocks = "", []
    for kind, body, heading in parts:
        if text:
            text += "\n\n"
        # As the loaders make them: a term's heading path ends with the term itself.
        path = (*heading, body) if kind == "term" else heading
        blocks.append(Block(len(text), len(text) + len(body), kind, path))
        text += body
    chunks = chunk_blocks(text, blocks, tokenizer, chunk_tokens=size, overlap_tokens=size // 3)
    content = [b for b in blocks if b.kind not in ("heading", "nav")]
    # A document of titles only: its titles are its text (untitled).
    if not content and not any(b.kind == "nav" for b in blocks):
        content = [Block(b.char_start, b.char_end) for b in blocks]
    covered = set()
    for chunk in chunks:
        body = text[chunk.char_start : chunk.char_end]
        assert body and body == body.strip()
        owners = [b for b in content if b.char_start < chunk.char_end and chunk.char_start < b.char_end]
        assert len({b.heading for b in owners}) == 1  # never two sections in one chunk
        opened_by_term = owners[0].kind == "term" and owners[0].char_start == chunk.char_start
        path = owners[0].heading[:-1] if opened_by_term or chunk.title else owners[0].heading
        assert chunk.heading == HEADING_SEPARATOR.join(path)
        if chunk.title:  # a later piece of an entry: its term(s), earlier in the text, as title
            a, b = chunk.title
            assert b <= chunk.char_start and text[a:b].split("\n\n")[-1] in owners[0].heading[-1]
        for a, b in chunk.segments:
            covered.update(range(a, b))
        # What the reader reads: the heading in front, then the title; every answerable segment is the
        # document's own text at the offsets it maps to, and the heading is in none.
        relative = tuple((a - chunk.char_start, b - chunk.char_start) for a, b in chunk.segments)
        title = text[chunk.title[0] : chunk.title[1]] if chunk.title else ""
        passage = Passage(
            "c",
            "d",
            "p",
            body,
            chunk.char_start,
            chunk.char_end,
            0.5,
            heading=chunk.heading,
            segments=relative,
            title=title,
            title_start=chunk.title[0] if chunk.title else None,
        )
        read = reader_input(passage)
        assert read.text.endswith(body) and read.text.startswith(chunk.heading)
        heading_end = len(chunk.heading) + 1 if chunk.heading else 0
        for a, b in read.segments:
            start, end = read.document_offset(a), read.document_offset(b)
            assert a >= heading_end and read.text[a:b] == text[start:end] == passage.text_at(start, end)
    for block in content:  # every word of every content block is in some chunk
        assert all(i in covered for i in range(block.char_start, block.char_end) if not text[i].isspace())


def test_a_document_of_titles_only_is_still_chunked(tmp_path: Path, tokenizer: Any) -> None:
    for name, content in [("note.txt", "Buy milk"), ("title.md", "# Release 2.0\n\n## Highlights\n")]:
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        loaded = load_file(path)
        chunks = chunk_blocks(loaded.text, loaded.blocks, tokenizer, chunk_tokens=50, overlap_tokens=5)
        covered = "".join(loaded.text[c.char_start : c.char_end] for c in chunks)
        assert chunks and all(word in covered for word in loaded.text.split()), name


def test_table_cells_and_hash_titles_do_not_bend_the_heading_path(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><body><h1>C#</h1><table><tr><td><h4>alpha</h4></td><td>first value</td></tr></table>"
        "<p>after the table</p></body></html>",
        encoding="utf-8",
    )
    blocks = _blocks(load_file(path))
    assert ("row", ("C#",), "alpha\n\nfirst value") in blocks
    assert ("text", ("C#",), "after the table") in blocks
