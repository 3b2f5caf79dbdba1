"""The one root of spanqa's errors, and the helpers that make any error fit on one line.

Every error a user can meet derives from :class:`SpanqaError` and its message is one line, fit to show as
it is: the CLI and the server catch this one class and print ``str(exc)``; anything else is a bug. Each area
defines its own errors beside its code (``CatalogError`` in the catalog, ``VectorIndexError`` in the index,
...), the way Haystack keeps per-area error modules under one root.
"""

from __future__ import annotations

# A reason longer than this is cut: it goes into a table cell, a log line or a one-line error.
MAX_REASON_CHARS = 300


class SpanqaError(Exception):
    """The root of every spanqa error; ``str(exc)`` is a one-line, user-facing message."""


def first_line(exc: BaseException | str, limit: int = MAX_REASON_CHARS) -> str:
    """The first non-empty line of an error (or text), cut to ``limit`` characters.

    A database driver's error is read through its ``orig`` (SQLAlchemy wraps it with SQL and a link);
    an error with no message is named by its type.

    Args:
        exc: an exception or a message.
        limit: at most this many characters ("..." marks a cut).

    Returns:
        One line, never empty for an exception.
    """
    if isinstance(exc, BaseException):
        source = getattr(exc, "orig", None) or exc
        text = str(source)
    else:
        source, text = None, exc
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not line and source is not None:
        line = type(source).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def redact_url(url: str) -> str:
    """``url`` safe to print: a password masked as ``***``, query and fragment (which may hold keys) dropped.

    Anything that is not ``scheme://...`` (a path, ``:memory:``) comes back as it is.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    rest = rest.split("#", 1)[0].split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        authority = f"{user}:***@{host}" if has_password else f"{user}@{host}"
    return f"{scheme}://{authority}{slash}{path}"
