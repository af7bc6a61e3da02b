"""Writing a run's outputs: the folder is replaced as a whole, or left as it was.

The files are written into a temporary folder beside ``out`` and swapped in with renames, so a
re-run leaves no file of the previous run behind (an old ``trace.perfetto.json``), and a run
killed while writing leaves the old folder intact. Temporary folders carry the writer's pid;
a later run removes those whose writer is gone.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memsim.errors import ConfigError

MARKER = "summary.json"  # a folder holding it is a memsim run the next run may replace


def write_outputs(out: Path, summary: dict[str, Any], ops: pd.DataFrame, timeline: pd.DataFrame,
                  hardware: dict[str, Any], extra: dict[str, str] | None = None) -> list[Path]:
    """Write every output into a temporary folder beside ``out``, then swap it in for ``out``."""
    given, out = Path(out), Path(out).absolute()
    _check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    old = None
    try:
        (tmp / MARKER).write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
        ops.to_csv(tmp / "ops.csv", index=False)
        timeline.to_csv(tmp / "timeline.csv", index=False)
        (tmp / "hardware.yaml").write_text(yaml.safe_dump(hardware, sort_keys=False))
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        names = sorted(p.name for p in tmp.iterdir())
        os.chmod(tmp, 0o777 & ~_umask())
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
            os.replace(out, old)
        os.replace(tmp, out)
        return [given / n for n in names]
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


def check_target(out: Path) -> None:
    """Refuse an ``--out`` that is a file, a folder of other things, or cannot be written, before a
    run spends its time."""
    out = Path(out).absolute()
    _check_target(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent)).rmdir()
    except OSError as exc:
        raise ConfigError(f"cannot write here: {exc.strerror or exc}", file=str(out), field="--out") from None


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", file=str(out), field="--out")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError("is not empty and holds no memsim run: give a new or empty folder", file=str(out),
                          field="--out")
    if out == Path.cwd() or out in Path.cwd().parents:
        raise ConfigError("is the working folder or holds it: give a folder below it", file=str(out), field="--out")


def remove_stale(out: Path) -> None:
    """Remove temporary folders beside ``out`` left by writers that died mid-write."""
    if not out.parent.is_dir():
        return
    for entry in out.parent.glob(f".{out.name}.*-*-*"):
        kind, _, rest = entry.name[len(out.name) + 2:].partition("-")
        pid = rest.partition("-")[0]
        if kind in ("tmp", "old") and pid.isdigit() and not _alive(int(pid)) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")
