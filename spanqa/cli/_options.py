"""Options that several commands share, written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def json_option(what: str = "the result") -> Decorator:
    """``--json`` (as ``as_json``): print ``what`` as JSON for scripts instead of text for people."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


def file_filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--include`` and ``--exclude`` globs (repeatable) that choose the files of a folder."""
    func = click.option(
        "--exclude", multiple=True, metavar="GLOB", help="Skip files matching this glob (repeatable)."
    )(func)
    return click.option(
        "--include", multiple=True, metavar="GLOB", help="Only files matching this glob (repeatable)."
    )(func)


path_glob_option: Decorator = click.option(
    "--path", "path_glob", metavar="GLOB", help="Only documents whose path matches this glob."
)
