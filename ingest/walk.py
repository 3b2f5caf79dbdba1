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


@dataclass(frozen=True)
class SkippedFile:
    """A file (or a hidden folder) a run left out, why, and what would take it in."""

    path: str
    reason: str
    hint: str = ""


_HINTS = {
    HIDDEN: "its name starts with '.'; name it as a path to ingest it",
    EXCLUDED: "left out by --include/--exclude",
    OUTSIDE: "a symlink out of the folder; follow_symlinks_out = true follows it",
}


def _left_out(
    counts: Counter[str], files: list[SkippedFile] | None, path: Path, reason: str, hint: str = ""
) -> None:
    counts[reason] += 1
    if files is not None:
        files.append(SkippedFile(str(path), reason, hint or _HINTS.get(reason, "")))


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
    skipped_files: list[SkippedFile] | None = None,
) -> Iterator[FoundFile]:
    """Yield the files under ``root`` to ingest, in a stable order.

    Hidden files and folders are skipped; symlinked folders are followed once (a loop is walked once, not
    forever); files are kept when their extension is supported, when ``is_text`` says their content is text
    (an extensionless README, a .csv, a source file), or when they match ``include``; they are dropped when
    they match ``exclude``. With ``confine_to`` (resolved folders), a symlink that leads out of them is
    neither followed nor read. ``skipped`` counts what was left out, by reason; ``skipped_files`` names it.
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
            _left_out(counts, skipped_files, Path(dirpath), OUTSIDE)
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        for hidden in (d for d in dirnames if d.startswith(".")):
            _left_out(counts, skipped_files, Path(dirpath) / hidden, HIDDEN)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                _left_out(counts, skipped_files, Path(dirpath) / filename, HIDDEN)
                continue
            path = Path(dirpath) / filename
            found = FoundFile(path=path, root=root)
            relative = found.relative_path
            if exclude and matches(relative, exclude):
                _left_out(counts, skipped_files, path, EXCLUDED, "matches --exclude")
                continue
            if not path.is_file():  # a FIFO, a socket or a device: never opened (reading a FIFO blocks)
                continue
            if confine_to and not inside(path, confine_to):
                _left_out(counts, skipped_files, path, OUTSIDE)
                continue
            if include:
                if not matches(relative, include):
                    _left_out(counts, skipped_files, path, EXCLUDED, "matches no --include")
                    continue
            elif path.suffix.lower() not in extensions and not (is_text is not None and is_text(path)):
                kind = path.suffix.lower() or "no extension"
                hint = f"no loader reads {kind} files; --include '*{path.suffix}' reads one as text"
                _left_out(counts, skipped_files, path, NOT_TEXT, hint if path.suffix else "binary content")
                continue
            yield found


def _log_walk_error(error: OSError) -> None:
    logger.warning("cannot read %s: %s", error.filename, error.strerror)
