"""The loaders, one per format: the extensions each claims, the function that reads it, and its version.

Adding a format is a module with a ``load(data) -> LoadedText`` and one line here (plus, when its files are
known by content rather than by name, a sniff in ``detect``). Raising a loader's version re-cuts that format's
files at their next ingest (``ingest.chunker.chunking_signature``), with no data migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spanqa.ingest.loaders.base import LoadedText
from spanqa.ingest.loaders.docx import load as load_docx
from spanqa.ingest.loaders.epub import load as load_epub
from spanqa.ingest.loaders.html import load_html, load_markdown
from spanqa.ingest.loaders.man import load as load_man
from spanqa.ingest.loaders.odt import load as load_odt
from spanqa.ingest.loaders.pdf import load as load_pdf
from spanqa.ingest.loaders.plain import load as load_text


@dataclass(frozen=True)
class Loader:
    """One format's loader.

    Attributes:
        format: the name documents record ("pdf", "man", ...).
        extensions: the file extensions it claims (a file is still chosen by content first).
        load: the file's bytes -> its text and structure; raises ``LoadError`` for a user-level problem.
        version: raised when what it extracts or how it cuts blocks changes.
    """

    format: str
    extensions: frozenset[str]
    load: Callable[[bytes], LoadedText]
    version: int = 1


LOADERS: dict[str, Loader] = {
    loader.format: loader
    for loader in (
        Loader("txt", frozenset({".txt", ".text", ".rst"}), load_text),
        Loader("md", frozenset({".md", ".markdown"}), load_markdown),
        Loader("html", frozenset({".html", ".htm", ".xhtml"}), load_html),
        # 2: running headers and footers kept out of passages. 3: hyphenated words whole, ligatures as
        # letters, printed page labels. 4: without bookmarks, lines in larger type are headings. 5: a page
        # set in two columns read column by column.
        Loader("pdf", frozenset({".pdf"}), load_pdf, version=5),
        # 2: pages, where the file records its page breaks.
        Loader("docx", frozenset({".docx"}), load_docx, version=2),
        Loader("odt", frozenset({".odt"}), load_odt),
        Loader("epub", frozenset({".epub"}), load_epub),
        # Found by content (man or mdoc source) or by name (ls.1.gz): section numbers are no extensions.
        Loader("man", frozenset(), load_man),
    )
}
EXTENSION_FORMATS: dict[str, str] = {ext: f for f, loader in LOADERS.items() for ext in loader.extensions}
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(EXTENSION_FORMATS)
#: Each format's loader version (``chunking_signature`` records it).
LOADER_VERSIONS: dict[str, int] = {f: loader.version for f, loader in LOADERS.items()}
