"""Writes that destroy nothing memsim did not write.

A file is written to a temporary file beside its target, then renamed into place. A target is
checked before a command spends its time: it must be a regular file or not exist yet (never a
link, a device, a pipe or a folder), must not be one of the command's own inputs, and its folder,
or the nearest folder above it that exists, must be writable. Nothing is created by the check:
the missing folders above a target are made only when its file is written.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from memsim.core.errors import ConfigError


def umask() -> int:
    """The process's file-creation mask (``mkstemp`` and ``mkdtemp`` ignore it; renamed files should not)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_output_file(path: Path, option: str, inputs: Iterable[Path] = ()) -> None:
    """Refuse ``path`` as the file ``option`` names unless writing it replaces only a regular file
    that is none of ``inputs``."""
    path = Path(path)
    if path.is_symlink():
        raise ConfigError("is a link: give the path of a regular file", file=str(path), field=option)
    if path.exists() and not path.is_file():
        raise ConfigError("exists and is not a regular file (a folder, device or pipe): memsim writes only regular "
                          "files", file=str(path), field=option)
    check_apart(path, option, inputs)
    check_writable_parent(path, option)


def check_apart(target: Path, option: str, inputs: Iterable[Path], what: str = "file") -> None:
    """Refuse an output ``target`` (a file, or a folder a command fills) that is one of the
    command's ``inputs`` or, as a folder, holds one: an output never replaces what was read."""
    target = Path(target)
    for source in map(Path, inputs):
        if same_file(target, source):
            raise ConfigError(f"is this command's input {source}: give another {what}", file=str(target), field=option)
        if holds(target, source):
            raise ConfigError(f"holds this command's input {source}: give another folder", file=str(target),
                              field=option)


def holds(folder: Path, path: Path) -> bool:
    """Whether ``path`` lies inside ``folder`` (links resolved; a folder does not hold itself)."""
    try:
        return Path(folder).resolve() in Path(path).resolve().parents
    except (OSError, RuntimeError):  # a link loop: not a file memsim reads
        return False


def folder_entries(out: Path, option: str) -> list[str]:
    """The names in the folder ``out`` (none where it does not exist yet); a link or a file there
    is refused (a command that replaces or fills a folder works on the folder itself)."""
    out = Path(out)
    if out.is_symlink():
        raise ConfigError("is a link: give the folder itself", file=str(out), field=option)
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", file=str(out), field=option)
    return sorted(p.name for p in out.iterdir()) if out.is_dir() else []


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (by identity where both exist, else by resolved path)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a link loop: not a file memsim reads
        return False


def check_writable_parent(path: Path, option: str) -> None:
    """The folder ``path`` would be written in, or the nearest folder above it that exists, is a
    folder memsim may write (nothing is created)."""
    above = Path(path).absolute().parent
    while not above.exists() and above != above.parent:
        if above.is_symlink():  # a dangling link: its folder cannot be made
            break
        above = above.parent
    if not above.is_dir():
        raise ConfigError(f"cannot write here: {above} is not a folder", file=str(path), field=option)
    try:  # a probe, removed at once: access() says yes to root on a read-only file system
        os.rmdir(tempfile.mkdtemp(prefix=".memsim-probe-", dir=above))
    except OSError as exc:
        raise ConfigError(f"cannot write here: {exc.strerror or exc}", file=str(path), field=option) from None


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):  # checked again: it may have changed since
        raise ConfigError("exists and is not a regular file: memsim writes only regular files", file=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~umask())
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
