"""Finding the files to ingest: globs, hidden files, symlink loops."""

from __future__ import annotations

import fnmatch
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
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


#: Why a file under a folder was not taken, as the ingest summary counts them.
HIDDEN, NOT_TEXT, EXCLUDED, OUTSIDE = "hidden", "not text", "excluded", "linked from outside"


def inside(path: Path | str, roots: Sequence[Path]) -> bool:
    """Whether ``path``, symlinks resolved, lies in one of ``roots`` (resolved folders)."""
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(root) for root in roots)


def walk(
    root: Path,
    *,
    extensions: frozenset[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    is_text: Callable[[Path], bool] | None = None,
    skipped: Counter[str] | None = None,
    confine_to: Sequence[Path] = (),
) -> Iterator[FoundFile]:
    """Yield the files under ``root`` to ingest, in a stable order.

    Hidden files and folders are skipped; symlinked folders are followed once (a loop is walked once, not
    forever); files are kept when their extension is supported, when ``is_text`` says their content is text
    (an extensionless README, a .csv, a source file), or when they match ``include``; they are dropped when
    they match ``exclude``. With ``confine_to`` (resolved folders), a symlink that leads out of them is
    neither followed nor read. ``skipped`` counts what was left out, by reason.
    """
    root = root.absolute()
    counts: Counter[str] = skipped if skipped is not None else Counter()
    seen_dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=_log_walk_error):
        real = os.path.realpath(dirpath)
        if real in seen_dirs:
            dirnames[:] = []
            continue
        if confine_to and not inside(real, confine_to):
            counts[OUTSIDE] += 1
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        hidden_dirs = [d for d in dirnames if d.startswith(".")]
        counts[HIDDEN] += len(hidden_dirs)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                counts[HIDDEN] += 1
                continue
            path = Path(dirpath) / filename
            found = FoundFile(path=path, root=root)
            relative = found.relative_path
            if exclude and matches(relative, exclude):
                counts[EXCLUDED] += 1
                continue
            if not path.is_file():  # a FIFO, a socket or a device: never opened (reading a FIFO blocks)
                continue
            if confine_to and not inside(path, confine_to):
                counts[OUTSIDE] += 1
                continue
            if include:
                if not matches(relative, include):
                    counts[EXCLUDED] += 1
                    continue
            elif path.suffix.lower() not in extensions and not (is_text is not None and is_text(path)):
                counts[NOT_TEXT] += 1
                continue
            yield found


def _log_walk_error(error: OSError) -> None:
    logger.warning("cannot read %s: %s", error.filename, error.strerror)
