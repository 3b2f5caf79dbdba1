"""The ``spanqa`` command line (Click): :func:`main` is the entry point; ``python -m spanqa.cli`` runs it."""

from spanqa.cli.root import main

__all__ = ["main"]
