"""The ``spanqa`` command: global options, then one command group per module of this package.

Only :mod:`spanqa.cli` knows Click; each module parses its commands' arguments, runs a job of the layers
below and prints. A command's module is imported only when that command runs (or help lists it): the model
training commands then need torch and transformers alone, as on a lent GPU machine without the stores'
libraries, and no command pays for the imports of the others. Heavy modules (models, stores) are imported
inside the commands that need them.
"""

from __future__ import annotations

import importlib
import logging
import os

import click

from spanqa import __version__
from spanqa.cli._errors import OneLineUsageErrors

# Model libraries print load reports and progress bars that mean nothing to a user asking a question.
for _name, _value in {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}.items():
    os.environ.setdefault(_name, _value)


#: Every command: its name, and the module of this package and the name in it that define it.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "ingest"),
    "reindex": ("ingest", "reindex"),
    "search": ("ask", "search"),
    "ask": ("ask", "ask"),
    "serve": ("serve", "serve"),
    "docs": ("docs", "docs_group"),
    "reader": ("reader", "reader_group"),
    "retriever": ("retriever", "retriever_group"),
    "eval": ("eval", "eval_group"),
    "worker": ("workers", "worker"),
    "beat": ("workers", "beat"),
    "watch": ("workers", "watch"),
    "jobs": ("workers", "jobs"),
    "status": ("admin", "status"),
    "doctor": ("admin", "doctor"),
    "db": ("admin", "db_group"),
    "config": ("admin", "config"),
    "completion": ("admin", "completion"),
}


class _Root(OneLineUsageErrors):
    """The root group, loading each command's module when the command is asked for (Click's lazy group)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, name = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"spanqa.cli.{module}"), name)
        return command


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spanqa")
@click.option("--config", type=click.Path(dir_okay=False), help="A spanqa.toml file (default ./spanqa.toml).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Where the catalog and index live (default: the nearest .spanqa here or above, else ./.spanqa).",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug logs).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, config: str | None, data_dir: str | None, verbose: int, debug: bool) -> None:
    """Ask questions of your own documents; get exact spans with file, page and offsets."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config": config, "data_dir": data_dir, "debug": debug, "verbose": verbose}
