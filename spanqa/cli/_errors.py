"""How the CLI fails: one line on stderr and an exit code; a traceback only with ``--debug``."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from spanqa.errors import SpanqaError, first_line
from spanqa.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED_FILES, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130


class UserError(SpanqaError, click.ClickException):
    """A one-line error for the user (a mistake in what was typed); exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class OneLineUsageErrors(click.Group):
    """The root group: Click's usage errors (a missing option, a file that does not exist) become one line
    too, naming the help to read, instead of a usage block."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise _one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from exc


def _one_line(exc: click.UsageError) -> click.ClickException:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # a bare group prints its help: not a mistake
        return exc
    where = exc.ctx.command_path if exc.ctx is not None else "spanqa"
    return UserError(f"{first_line(exc.format_message())} (see `{where} --help`)")


def friendly_errors(func: F) -> F:
    """Turn spanqa's errors into one-line messages; anything else is a bug, shown as "unexpected"."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            if _debug():
                raise
            if isinstance(exc, SpanqaError):
                raise UserError(first_line(exc)) from exc
            raise UserError(
                f"unexpected {type(exc).__name__}: {first_line(exc)} (run with --debug for details)"
            ) from exc

    return wrapper  # type: ignore[return-value]


def _debug() -> bool:
    obj = click.get_current_context().find_root().obj
    return bool(obj and obj.get("debug"))


def settings_from(ctx: click.Context) -> Settings:
    """The settings of this invocation (global options, ``spanqa.toml``, environment), loaded once."""
    obj = ctx.find_root().obj or {}
    settings = obj.get("settings")
    if settings is None:
        try:
            settings = Settings.load(config_file=obj.get("config"), data_dir=obj.get("data_dir"))
        except SpanqaError as exc:
            raise UserError(first_line(exc)) from exc
        obj["settings"] = settings
    return settings
