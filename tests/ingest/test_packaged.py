"""EPUB e-books and OpenDocument text: chapters in spine order under their table of contents, ODT structure
like DOCX, and the same guards against zip bombs and broken XML."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from spanqa.ingest.loaders import HEADING, TEXT, LoadError, detect_format, load_file
from spanqa.ingest.loaders.zipped import MAX_UNPACKED

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""

OPF = """<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0">
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>
    <item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>
    <item id="img" href="cover.png" media-type="image/png"/>
  </manifest>
  <spine><itemref idref="c1"/><itemref idref="c2"/><itemref idref="img"/></spine>
</package>"""

NAV = """<?xml version="1.0"?>
<html xmlns="http://www.w3.org/1999/xhtml"><body><nav><ol>
  <li><a href="text/one.xhtml">Getting started</a></li>
  <li><a href="text/two.xhtml#top">Limits</a></li>
</ol></nav></body></html>"""


def chapter(body: str) -> str:
    return f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>'


def make_epub(path: Path, *, members: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        for name, text in (
            members
            or {
                "META-INF/container.xml": CONTAINER,
                "OEBPS/content.opf": OPF,
                "OEBPS/nav.xhtml": NAV,
                "OEBPS/text/one.xhtml": chapter("<p>Install the frob package first.</p>"),
                "OEBPS/text/two.xhtml": chapter(
                    "<h1>Limits and defaults</h1><dl><dt>maxconn</dt><dd>The default is 256.</dd></dl>"
                ),
            }
        ).items():
            archive.writestr(name, text)
    return path


ODT_CONTENT = """<?xml version="1.0"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
  xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
  xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0">
 <office:body><office:text>
  <text:sequence-decls><text:sequence-decl text:name="Table"/></text:sequence-decls>
  <text:h text:outline-level="1">Frob manual</text:h>
  <text:p>Frob reads<text:s text:c="2"/>every file.<text:note><text:note-body><text:p>A footnote.</text:p>
  </text:note-body></text:note></text:p>
  <text:h text:outline-level="2">Options</text:h>
  <text:list><text:list-item><text:p>--lines sets the count</text:p></text:list-item></text:list>
  <table:table><table:table-row><table:table-cell><text:p>Level</text:p></table:table-cell>
  <table:table-cell><text:p>Meaning</text:p></table:table-cell></table:table-row></table:table>
 </office:text></office:body>
</office:document-content>"""


def make_odt(path: Path, content: str = ODT_CONTENT) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("content.xml", content)
    return path


def test_epub_chapters_in_spine_order_under_their_toc_titles(tmp_path: Path) -> None:
    loaded = load_file(make_epub(tmp_path / "book.epub"))
    assert loaded.format == "epub"
    text = loaded.text
    assert text.index("Install the frob") < text.index("Limits and defaults")  # spine order, not manifest
    blocks = [(b.kind, text[b.char_start : b.char_end], b.heading) for b in loaded.blocks]
    assert (HEADING, "Getting started", ()) in blocks  # a chapter without a title takes its TOC entry's
    assert not any(t == "Limits" for _, t, _ in blocks)  # one with its own title keeps it
    entry = next(h for kind, t, h in blocks if kind == TEXT and t == "The default is 256.")
    assert entry == ("Limits and defaults", "maxconn")


def test_an_epub2_ncx_gives_the_titles_too(tmp_path: Path) -> None:
    ncx = """<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>
      <navPoint id="a"><navLabel><text>Chapter One</text></navLabel><content src="one.xhtml"/></navPoint>
    </navMap></ncx>"""
    opf = """<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0"><manifest>
      <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
      <item id="c1" href="one.xhtml" media-type="application/xhtml+xml"/></manifest>
      <spine toc="ncx"><itemref idref="c1"/></spine></package>"""
    members = {
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": opf,
        "OEBPS/toc.ncx": ncx,
        "OEBPS/one.xhtml": chapter("<p>Plain words.</p>"),
    }
    loaded = load_file(make_epub(tmp_path / "old.epub", members=members))
    assert loaded.text.startswith("Chapter One") and "Plain words." in loaded.text


def test_odt_headings_lists_and_tables_like_docx(tmp_path: Path) -> None:
    loaded = load_file(make_odt(tmp_path / "manual.odt"))
    assert loaded.format == "odt"
    blocks = [(b.kind, loaded.text[b.char_start : b.char_end], b.heading) for b in loaded.blocks]
    assert (HEADING, "Frob manual", ()) in blocks and (HEADING, "Options", ("Frob manual",)) in blocks
    assert (TEXT, "--lines sets the count", ("Frob manual", "Options")) in blocks
    assert "Frob reads every file." in loaded.text  # text:s spaces, normalized; the footnote left out
    assert "footnote" not in loaded.text
    # Table cells are read cell by cell, as DOCX's are, under the heading they sit in.
    assert (TEXT, "Level", ("Frob manual", "Options")) in blocks and (
        TEXT,
        "Meaning",
        ("Frob manual", "Options"),
    ) in blocks


def test_detection_by_content_whatever_the_name(tmp_path: Path) -> None:
    epub = make_epub(tmp_path / "book.zip")
    odt = make_odt(tmp_path / "notes.bin")
    assert detect_format(epub, epub.read_bytes()[:8192]) == "epub"
    assert detect_format(odt, odt.read_bytes()[:8192]) == "odt"
    other = tmp_path / "photos.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("a.txt", "x")
    assert detect_format(other, other.read_bytes()[:8192]) is None


@pytest.mark.parametrize("maker", [make_epub, make_odt])
def test_zip_bombs_are_refused_before_parsing(tmp_path: Path, maker: object) -> None:
    path = tmp_path / ("bomb.epub" if maker is make_epub else "bomb.odt")
    assert callable(maker)
    maker(path)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("padding.bin", b"\0" * (MAX_UNPACKED + 1))
    with pytest.raises(LoadError, match="unpacks to") as caught:
        load_file(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("broken.odt", lambda p: make_odt(p, ODT_CONTENT[:300])),
        ("nocontainer.epub", lambda p: make_epub(p, members={"OEBPS/one.xhtml": chapter("<p>x</p>")})),
        (
            "badopf.epub",
            lambda p: make_epub(
                p, members={"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": "<package><manifest>"}
            ),
        ),
    ],
)
def test_broken_xml_is_a_one_line_error(tmp_path: Path, name: str, build: object) -> None:
    assert callable(build)
    path = build(tmp_path / name)
    with pytest.raises(LoadError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith("corrupt ") and "\n" not in message
