"""Finding the files to ingest: globs, hidden files, symlink loops."""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FoundFile:
    """A file to ingest and the root it was found under (relative paths are taken from there)."""

    path: Path
    root: Path
    explicit: bool = False

    @property
    def relative_path(self) -> str:
        try:
            return self.path.relative_to(self.root).as_posix()
        except ValueError:
            return self.path.name


def matches(relative_path: str, patterns: Sequence[str]) -> bool:
    """True when the path or its file name matches one of the glob patterns (``**/`` may match nothing)."""
    name = relative_path.rsplit("/", 1)[-1]
    for pattern in patterns:
        if fnmatch.fnmatchcase(relative_path, pattern) or fnmatch.fnmatchcase(name, pattern):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatchcase(relative_path, pattern[3:]):
            return True
    return False


def walk(
    root: Path,
    *,
    extensions: frozenset[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Iterator[FoundFile]:
    """Yield the files under ``root`` to ingest, in a stable order.

    Hidden files and folders are skipped; symlinked folders are followed once (a loop is walked once, not
    forever); files are kept when their extension is supported or they match ``include``, and dropped
    when they match ``exclude``.
    """
    root = root.absolute()
    seen_dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=_log_walk_error):
        real = os.path.realpath(dirpath)
        if real in seen_dirs:
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            path = Path(dirpath) / filename
            found = FoundFile(path=path, root=root)
            relative = found.relative_path
            if exclude and matches(relative, exclude):
                continue
            if include:
                if not matches(relative, include):
                    continue
            elif path.suffix.lower() not in extensions:
                continue
            if not path.is_file():
                continue
            yield found


def _log_walk_error(error: OSError) -> None:
    logger.warning("cannot read %s: %s", error.filename, error.strerror)
