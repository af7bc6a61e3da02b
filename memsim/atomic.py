"""Atomic file writes: write a temporary file beside the target, then rename it into place."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's file-creation mask (``mkstemp`` and ``mkdtemp`` ignore it; renamed files should not)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
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
