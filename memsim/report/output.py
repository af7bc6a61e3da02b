"""Writing a run's outputs (the folder is replaced as a whole, or left as it was); its tables are
read back by ``memsim.report.readback``.

The files are written into a temporary folder beside ``out`` and swapped in with two renames
(``out`` aside to an ``old`` folder, the new folder in), so a re-run leaves no file of the
previous run behind (an old ``trace.perfetto.json``). No signal at any instant loses both runs:
SIGINT, SIGTERM and SIGHUP are held until the swap is over; a rename that fails puts the old run
back; and a writer killed outright between the renames leaves its ``old`` folder, which the next
run puts back in place rather than removing. Temporary folders carry the writer's pid; a later
run clears those whose writer is gone.

memsim replaces only what it wrote: an ``out`` holding any file a run does not write, or one of
the run's own inputs, is refused.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memsim.core.atomic import check_apart, check_writable_parent, folder_entries, umask
from memsim.core.errors import ConfigError, run_field
from memsim.hardware.estimates import yaml_text
from memsim.report.rows import Rows

MARKER = "summary.json"  # a folder holding it is a memsim run the next run may replace
FIGURES = ("gantt.png", "roofline.png", "stalls.png", "energy.png")  # what ``memsim plot run`` adds
REPORT = "report.html"  # what ``memsim report`` (or ``run --html``) adds
# The run's data, which ``memsim report`` and ``memsim plot run`` read: never one of their outputs.
DATA = (MARKER, "timeline.csv", "ops.csv", "hardware.yaml")
# Every file a run folder can hold: the run's outputs and the figures ``memsim plot run`` adds.
OWN = frozenset({MARKER, "ops.csv", "timeline.csv", "hardware.yaml", "trace.perfetto.json", REPORT, *FIGURES})
DEFERRED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def write_outputs(out: Path, summary: dict[str, Any], ops: Rows, timeline: Rows,
                  hardware: dict[str, Any], extra: dict[str, str] | None = None,
                  inputs: Iterable[Path] = ()) -> list[Path]:
    """Write every output into a temporary folder beside ``out``, then swap it in for ``out``
    (never over one of the run's ``inputs``)."""
    given, out = Path(out), Path(out).absolute()
    _check_target(out)
    check_apart(out, run_field("out"), inputs, "folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    tmp = _temp_folder(out, "tmp")
    old, swapped = None, False
    try:
        (tmp / MARKER).write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
        for name, table in (("ops.csv", ops), ("timeline.csv", timeline)):
            with open(tmp / name, "w", encoding="utf-8") as fh:  # a chunk of rows at a time
                table.write_csv(fh)
        (tmp / "hardware.yaml").write_text(yaml_text(hardware))
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        names = sorted(p.name for p in tmp.iterdir())
        os.chmod(tmp, 0o777 & ~umask())
        with signals_deferred():
            if out.exists():
                old = _temp_folder(out, "old")
                os.replace(out, old)
            try:
                os.replace(tmp, out)
            except BaseException:
                if old is not None:
                    os.replace(old, out)
                    old = None
                raise
            swapped = True
        return [given / n for n in names]
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and (swapped or not any(old.iterdir())):
            shutil.rmtree(old, ignore_errors=True)  # the previous run, replaced; or the unused folder for it


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP that arrive inside are held and sent again when it ends, to the
    handlers they were meant for (Python runs signal handlers on the main thread only, so a swap
    on another thread cannot hold them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in DEFERRED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in caught:
            os.kill(os.getpid(), signum)


def check_target(out: Path, inputs: Iterable[Path] = ()) -> None:
    """Refuse an ``--out`` that is a file, a link, a folder of other things or of the run's own
    ``inputs``, or cannot be written, before a run spends its time (nothing is created)."""
    out = Path(out).absolute()
    _check_target(out)
    check_apart(out, run_field("out"), inputs, "folder")
    check_writable_parent(out, run_field("out"))


def _check_target(out: Path) -> None:
    held = folder_entries(out, run_field("out"))
    if held and MARKER not in held:
        raise ConfigError("is not empty and holds no memsim run: give a new or empty folder", file=str(out),
                          field=run_field("out"))
    foreign = [name for name in held if name not in OWN]
    if foreign:
        raise ConfigError(f"holds {foreign[0]!r}, which no memsim run writes: give a new or empty folder",
                          file=str(out), field=run_field("out"))
    if out == Path.cwd() or out in Path.cwd().parents:
        raise ConfigError("is the working folder or holds it: give a folder below it", file=str(out), field=run_field("out"))


def _temp_folder(out: Path, kind: str) -> Path:
    """A new folder beside ``out`` named for its kind (``tmp``, ``old``) and this process's pid."""
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.{kind}-{os.getpid()}-", dir=out.parent))


def remove_stale(out: Path) -> None:
    """Clear the temporary folders beside ``out`` left by writers that died mid-write: a dead
    writer's ``old`` folder is the previous run, put back where no run stands in its place."""
    if not out.parent.is_dir():
        return
    stale = []
    for entry in out.parent.glob(f".{out.name}.*-*-*"):
        kind, _, rest = entry.name[len(out.name) + 2:].partition("-")
        pid = rest.partition("-")[0]
        if kind in ("tmp", "old") and pid.isdigit() and not _alive(int(pid)) and entry.is_dir() \
                and not entry.is_symlink():
            stale.append((kind, entry))
    for kind, entry in sorted(stale, key=lambda ke: -ke[1].stat().st_mtime):  # the newest old run first
        if kind == "old" and not out.exists() and not out.is_symlink():
            os.replace(entry, out)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")
