"""Man pages: groff ``man`` and BSD ``mdoc`` sources (gzipped or not) as HTML the HTML walk reads.

A man page is troff source: macros (``.SH``, ``.TP``, ``.It`` ...) and escapes (``\\fB``, ``\\-``, ``\\(em``).
Instead of a second structure walk, the page is translated into the small HTML the HTML loader already
understands: ``.TH``/``.Dt`` a title, ``.SH``/``.Sh`` and ``.SS``/``.Ss`` headings (NAME, SYNOPSIS, OPTIONS
... become the heading path), ``.TP``/``.IP``/``.It`` entries a definition list whose term opens its passage,
``.nf``/``.EX``/``.Bd -literal`` code blocks, ``tbl`` tables rows. Font changes, hyphenation marks and
spacing escapes are dropped for reading. The extracted text is what the catalog stores and what answers'
offsets index; it is not the file's bytes (a man page's source is not what anyone reads).

Not rendered: macro definitions (``.de``), conditionals (``.if``/``.ie``/``.el``), number registers and
drawing escapes; a page that only includes another (``.so man1/other.1``) is reported as such, never
followed, so ingesting one section never pulls in another.
"""

from __future__ import annotations

import gzip
import html
import io
import re

from spanqa.ingest.loaders.base import LoadedText, LoadError, NotADocument
from spanqa.ingest.loaders.decode import _decode_text
from spanqa.ingest.loaders.html import _html_walk, structured

GZIP_MAGIC = b"\x1f\x8b"

#: A man page's file name: a section digit and an optional suffix (``ls.1``, ``ssl.3ssl``), maybe gzipped.
MAN_NAME = re.compile(r"\.[1-9][a-z0-9]{0,8}(?:\.gz)?$", re.IGNORECASE)
_MACRO_START = re.compile(r"^(?:\.\\\"[^\n]*\n|'\\\"[^\n]*\n|\s*\n)*\.(?:TH|Dd|Dt|SH|Sh|so)\b", re.MULTILINE)
#: The most a gzipped page may unpack to (a real one is well under 1 MB): bigger is refused, a gzip bomb.
MAX_UNPACKED = 20_000_000


class ManPageError(LoadError):
    """A man page that cannot be read; the message is one line."""


class ManLinkError(NotADocument):
    """A page that only includes another (``.so``): an alias, with nothing of its own to read."""


def looks_like_man(name: str, text_head: str) -> bool:
    """Whether a text is man/mdoc source: it opens (after comments) with a title, section or ``.so``."""
    del name
    return bool(_MACRO_START.match(text_head))


def gunzip(data: bytes) -> bytes:
    """The unpacked bytes of a gzipped page, refusing more than ``MAX_UNPACKED``."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
            out = fh.read(MAX_UNPACKED + 1)
    except (OSError, EOFError) as exc:
        raise ManPageError(f"corrupt gzip data ({exc})") from exc
    if len(out) > MAX_UNPACKED:
        raise ManPageError(f"unpacks to more than {MAX_UNPACKED // 1_000_000} MB (a gzip bomb?)")
    return out


# --- escapes ----------------------------------------------------------------------------------------------

_NAMED = {
    "em": "—",
    "en": "–",
    "hy": "-",
    "mi": "-",
    "aq": "'",
    "dq": '"',
    "lq": "“",
    "rq": "”",
    "oq": "‘",
    "cq": "’",
    "bu": "•",
    "co": "©",
    "rg": "®",
    "tm": "™",
    "de": "°",
    "+-": "±",
    "mu": "×",
    "di": "÷",
    "->": "→",
    "<-": "←",
    "<=": "≤",
    ">=": "≥",
    "!=": "≠",
    "==": "≡",
    "ti": "~",
    "ha": "^",
    "rs": "\\",
    "sl": "/",
    "ba": "|",
    "or": "|",
    "at": "@",
    "sh": "#",
    "Do": "$",
    "ct": "¢",
    "ua": "↑",
    "da": "↓",
    "bv": "|",
    "fm": "′",
    "sd": "″",
    "ga": "`",
    "aa": "´",
    "ul": "_",
    "ru": "_",
    "pl": "+",
    "eq": "=",
    "lB": "[",
    "rB": "]",
    "lC": "{",
    "rC": "}",
    "la": "⟨",
    "ra": "⟩",
    "Fo": "«",
    "Fc": "»",
}
_STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "Aq": "'", "aq": "'", "dq": '"', "Lq": "“", "Rq": "”"}
_ESCAPE = re.compile(
    r"""\\(?:
        (?P<font>f(?:\[[^\]]*\]|\(..|.))
      | (?P<named>\((?P<n2>..)|\[(?P<nb>[^\]]*)\])
      | (?P<string>\*(?:\((?P<s2>..)|\[(?P<sb>[^\]]*)\]|(?P<s1>.)))
      | (?P<size>s[-+]?(?:\d{1,2}|\(\d\d|\[\d+\]))
      | (?P<arg>[hvwlLNbCDoSXZx]'[^']*')
      | (?P<reg>[nkgzm$](?:\(..|\[[^\]]*\]|.))
      | (?P<char>.)
    )""",
    re.VERBOSE,
)


def _escape(match: re.Match[str]) -> str:
    if match.group("font") or match.group("size") or match.group("arg") or match.group("reg"):
        return ""
    if match.group("named"):
        name = match.group("n2") or match.group("nb") or ""
        if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}", name):
            return chr(int(name[1:], 16))
        return _NAMED.get(name, "")
    if match.group("string"):
        name = match.group("s2") or match.group("sb") or match.group("s1") or ""
        return _STRINGS.get(name, "")
    char = match.group("char")
    return {
        "-": "-",
        "e": "\\",
        "\\": "\\",
        "&": "",
        "|": "",
        "^": "",
        "%": "",
        ")": "",
        "0": " ",
        "~": " ",
        " ": " ",
        "c": "",
        "t": "\t",
        "'": "´",
        "`": "`",
        ".": ".",
        "a": "",
        "d": "",
        "u": "",
        "r": "",
        "p": "",
        "E": "",
        "{": "",
        "}": "",
        "!": "",
        "/": "",
        ",": "",
        ":": "",
    }.get(char, char)


def unescape(text: str) -> str:
    """Readable text of a troff line: escapes resolved, font changes and hyphenation marks dropped."""
    text = re.sub(r'\\".*$', "", text)  # a comment to the end of the line
    return _ESCAPE.sub(_escape, text)


# --- translation ------------------------------------------------------------------------------------------

_IGNORED = frozenset(
    [
        "ad",
        "na",
        "hy",
        "nh",
        "ne",
        "in",
        "ti",
        "ft",
        "ps",
        "ll",
        "ta",
        "tr",
        "cs",
        "ss",
        "nr",
        "ds",
        "as",
        "rm",
        "rn",
        "so",
        "PD",
        "UC",
        "DT",
        "hw",
        "fam",
        "ev",
        "lf",
        "cu",
        "ul",
        "pc",
        "mso",
        "Os",
        "Dd",
        "bd",
        "ec",
        "eo",
        "lt",
        "mk",
        "rt",
        "pl",
        "po",
        "pn",
        "tm",
        "ab",
        "ch",
        "wh",
        "it",
        "em",
        "fl",
    ]
)
# mdoc macros that print their arguments as words (the macro name dropped)
_MDOC_WORDS = frozenset(
    [
        "Ar",
        "Cm",
        "Dv",
        "Er",
        "Ev",
        "Fa",
        "Fn",
        "Ft",
        "Ic",
        "Li",
        "Pa",
        "Va",
        "Vt",
        "Sy",
        "Em",
        "Ad",
        "An",
        "Lk",
        "Mt",
        "Ms",
        "St",
        "Tn",
        "Ux",
        "Bx",
        "Ox",
        "Nx",
        "Fx",
        "Dx",
        "At",
        "Bsx",
        "Cd",
        "Ot",
        "Lb",
        "In",
        "Fd",
        "Sx",
        "No",
        "Ns",
        "Ap",
        "Pf",
        "Dq",
        "Sq",
        "Qq",
        "Ql",
        "Pq",
        "Bq",
        "Brq",
        "Aq",
        "Xo",
        "Xc",
        "Eo",
        "Ec",
        "Do",
        "Dc",
        "So",
        "Sc",
        "Qo",
        "Qc",
        "Po",
        "Pc",
        "Bo",
        "Bc",
        "Ao",
        "Ac",
        "Oo",
        "Oc",
        "Op",
        "Fl",
        "Xr",
        "Nm",
        "Nd",
    ]
)
# man's font macros: their arguments are the words (alternating fonts joined without spaces)
_FONT_MACROS = frozenset(["B", "I", "BR", "RB", "BI", "IB", "IR", "RI", "SM", "SB", "R"])
_QUOTES = {
    "Dq": ("“", "”"),
    "Sq": ("‘", "’"),
    "Qq": ('"', '"'),
    "Pq": ("(", ")"),
    "Bq": ("[", "]"),
    "Brq": ("{", "}"),
    "Aq": ("<", ">"),
    "Op": ("[", "]"),
}


def _arguments(rest: str) -> list[str]:
    """A macro line's arguments: words, or "quoted strings" ("" for a literal quote inside)."""
    out = []
    for match in re.finditer(r'"((?:[^"]|"")*)"|(\S+)', rest):
        out.append(match.group(1).replace('""', '"') if match.group(1) is not None else match.group(2))
    return out


class _Page:
    """The HTML being built: one open block at a time, definition lists for entries."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.open: str | None = None  # "p", "pre", "dt", "dd", "table"
        self.in_dl = False
        self.name = ""  # mdoc's .Nm, once given

    def close(self) -> None:
        if self.open == "table":
            self.parts.append("</table>")
        elif self.open:
            self.parts.append(f"</{self.open}>")
        self.open = None

    def end_list(self) -> None:
        self.close()
        if self.in_dl:
            self.parts.append("</dl>")
            self.in_dl = False

    def block(self, tag: str) -> None:
        self.close()
        if tag in ("dt", "dd") and not self.in_dl:
            self.parts.append("<dl>")
            self.in_dl = True
        self.parts.append(f"<{tag}>")
        self.open = tag

    def heading(self, level: int, text: str) -> None:
        self.end_list()
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def words(self, text: str, *, line: bool = False) -> None:
        if not text.strip() and self.open != "pre":
            return
        if self.open is None:
            self.block("dd" if self.in_dl else "p")
        self.parts.append(html.escape(text) + ("\n" if line or self.open == "pre" else " "))

    def html(self) -> str:
        self.end_list()
        return "<html><body>" + "".join(self.parts) + "</body></html>"


def to_html(source: str) -> str:
    """Translate man or mdoc source into HTML for the HTML walk (see the module docstring).

    Raises:
        ManLinkError: the page only includes another one (``.so``).
    """
    lines = source.replace("\r\n", "\n").split("\n")
    meaningful = [ln for ln in lines if ln.strip() and not re.match(r"^[.']\s*\\\"", ln)]
    if meaningful and all(ln.startswith(".so ") for ln in meaningful):
        raise ManLinkError(f"a link to another man page ({meaningful[0][4:].strip()}), not followed")
    page = _Page()
    skip_until: str | None = None
    fill = True
    table_format = False
    term_next = False  # .TP: the next text line is the entry's term
    extended = False  # inside an mdoc ".It Xo ... .Xc" entry name
    for raw in lines:
        if skip_until is not None:
            if raw.strip().startswith(skip_until):
                skip_until = None
            continue
        if table_format:  # tbl's options and format lines run to the first line ending with "."
            if raw.rstrip().endswith("."):
                table_format = False
            continue
        if raw.startswith((".", "'")) and len(raw) > 1:
            parts = raw[1:].strip().split(None, 1)
            if not parts:
                continue
            macro, rest = parts[0], parts[1] if len(parts) > 1 else ""
            if macro.startswith('\\"'):
                continue
            if macro in ("de", "de1", "am", "ig"):
                skip_until = ".."
                continue
            if macro in ("if", "ie", "el") or macro in _IGNORED:
                continue
            args = [unescape(a) for a in _arguments(rest)]
            joined = " ".join(args)
            if macro in ("TH", "Dt"):
                title = f"{args[0]}({args[1]})" if len(args) > 1 else joined
                page.heading(1, title)
            elif macro in ("SH", "Sh"):
                page.heading(2, joined.strip())
            elif macro in ("SS", "Ss"):
                page.heading(3, joined.strip())
            elif macro in ("PP", "P", "LP", "Pp", "sp", "HP", "Lp"):
                if page.in_dl and page.open == "dd" and macro in ("sp", "Pp"):
                    page.words("")  # a paragraph inside an entry stays in the entry
                else:
                    page.end_list()
            elif macro == "TP" or macro == "TQ":
                term_next = True
            elif macro == "IP":
                if args and args[0].strip() not in ("", "•", "*", "-"):
                    page.block("dt")
                    page.words(args[0])
                    page.block("dd")
                elif page.in_dl:
                    page.block("dd")
                else:
                    page.block("p")
            elif macro in ("nf", "EX"):
                fill = False
                page.block("pre")
            elif macro in ("fi", "EE"):
                fill = True
                if page.open == "pre":
                    page.close()
            elif macro == "br":
                if page.open and page.open != "pre":
                    page.parts.append("<br>")
            elif macro == "TS":
                page.close()
                page.parts.append("<table>")
                page.open = "table"
                table_format = True
            elif macro == "TE":
                if page.open == "table":
                    page.close()
            elif macro == "RS" or macro == "RE":
                continue
            elif macro in ("SY",):
                page.block("p")
                page.words(joined)
            elif macro in ("YS",):
                page.close()
            elif macro in ("OP",):
                page.words("[" + " ".join(args) + "]")
            elif macro in ("UR", "MT", "UE", "ME"):
                if macro in ("UE", "ME") and joined:
                    page.words(joined)
                continue
            elif macro == "Bl" or macro == "El":
                page.end_list()
            elif macro == "It":
                page.block("dt")
                page.words(_mdoc_words("It", rest, page) or "")
                # ".It Xo" runs the entry's name over the lines up to ".Xc"
                extended = "Xo" in args and "Xc" not in args
                if not extended:
                    page.block("dd")
            elif macro in ("Bd", "Dl"):
                if macro == "Dl":
                    page.block("pre")
                    page.words(_mdoc_words("Dl", rest, page) or joined)
                    page.close()
                elif "-literal" in rest or "-unfilled" in rest:
                    fill = False
                    page.block("pre")
                else:
                    page.block("p")
            elif macro == "Ed":
                fill = True
                page.close()
            elif macro == "Nm" and not page.name and args:
                page.name = args[0]
                page.words(args[0])
            elif macro in _MDOC_WORDS or macro in (
                "B",
                "I",
                "BR",
                "RB",
                "BI",
                "IB",
                "IR",
                "RI",
                "SM",
                "SB",
                "R",
            ):
                words = _mdoc_words(macro, rest, page) if macro in _MDOC_WORDS else "".join(args)
                if extended:
                    page.words(words)
                    if "Xc" in args or macro == "Xc":
                        page.block("dd")
                        extended = False
                elif term_next:
                    page.block("dt")
                    page.words(words)
                    page.block("dd")
                    term_next = False
                else:
                    page.words(words, line=not fill)
            continue
        text = unescape(raw)
        if term_next:
            page.block("dt")
            page.words(text)
            page.block("dd")
            term_next = False
        elif page.open == "table":
            cells = [c.strip() for c in text.split("\t")]
            page.parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        else:
            page.words(text, line=not fill)
    return page.html()


def _mdoc_words(macro: str, rest: str, page: _Page) -> str:
    """An mdoc line as the words it prints: flags with their dash, [optional] parts, name(section)."""
    tokens = [unescape(a) for a in _arguments(rest)]
    out: list[str] = []
    closers: list[str] = []
    pending = macro
    glue = False  # Ns: no space before the next word
    i = 0
    while True:
        if pending in _QUOTES:
            opener, closer = _QUOTES[pending]
            out.append(("" if glue else " ") + opener)
            closers.append(closer)
            glue = True
        elif pending == "Fl":
            out.append(("" if glue else " ") + "-")
            glue = True
        elif pending == "Nm" and (i >= len(tokens) or tokens[i] in _MDOC_WORDS):
            out.append(("" if glue else " ") + page.name)
            glue = False
        elif pending == "Nd":
            out.append(" —")
        elif pending == "Ns":
            glue = True
        elif pending == "Xr" and i + 1 < len(tokens):
            out.append(("" if glue else " ") + f"{tokens[i]}({tokens[i + 1]})")
            i += 2
            glue = False
        if i >= len(tokens):
            break
        token = tokens[i]
        i += 1
        if token in _MDOC_WORDS or token in ("Ns",):
            pending = token
            continue
        pending = ""
        if re.fullmatch(r"[.,;:)\]!?]", token):
            out.append(token)
        else:
            out.append(("" if glue else " ") + token)
        glue = False
    out.extend(reversed(closers))
    return "".join(out).strip()


def load(data: bytes) -> LoadedText:
    """A man page (gzipped or not) as the HTML walk reads its translation."""
    try:
        source, encoding = _decode_text(gunzip(data) if data.startswith(GZIP_MAGIC) else data)
        return structured(_html_walk(to_html(source)), "man", encoding)
    except ManPageError as exc:
        raise LoadError(f"cannot read the man page: {exc}") from exc
