"""An experiment's folder (a sweep's, or ``memsim explain --out``'s): which experiment it holds,
which points are done, and who writes it.

A point is keyed by everything its result depends on: the resolved run (every ``RunSpec``
field, hardware overrides included), the content of the files it names (hardware, system,
model or trace) and the memsim version. The folder records its experiment in
``sweep.json``; a different experiment sent to the same folder is refused, never mixed in.
One sweep at a time writes a folder: the second finds its lock taken and stops. A folder
that holds anything but a sweep's own files is refused, so a sweep writes nothing among
someone else's files.

The contents of the files a swept field names (``--set hw=a.yaml,b.yaml``) are recorded too: a
resume after one of them changed is refused rather than mixing old and new results.

Finished points are appended to ``points.jsonl`` (fsynced, the log a re-run resumes from) and
to ``results.csv``; the CSV is written whole only when a row brings a column it lacks, and once
at the end in the sweep's order, so a point costs the same at the end of a long sweep as at
its start.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from memsim import __version__
from memsim.core import units
from memsim.core.atomic import atomic_write_text, check_apart, check_writable_parent, folder_entries
from memsim.core.errors import ConfigError, run_field
from memsim.run.inputs import FILE_FIELDS, path_of
from memsim.sweep.values import NUMERIC


@dataclass(frozen=True, kw_only=True)
class Folder:
    """A kind of experiment folder: the ``manifest`` that records its experiment, the entries it
    writes (``own``) and what it is called in a refusal (``what``, ``noun``)."""
    manifest: str
    own: frozenset[str]
    what: str
    noun: str


PAGES = frozenset({"report.html", "plotly.min.js"})  # memsim report's page of the folder, and the plotly.js it loads
SWEEP = Folder(manifest="sweep.json", own=frozenset({".lock", "sweep.json", "points.jsonl", "results.csv", "results.png",
                                                    "points", *PAGES}), what="a sweep's", noun="sweep")
EXPLAIN = Folder(manifest="explain.json", own=frozenset({".lock", "explain.json", "points.jsonl", "explain.csv", "points",
                                                         *PAGES}), what="memsim explain's", noun="explain run")
FOLDERS = (SWEEP, EXPLAIN)
MANIFEST, OWN = SWEEP.manifest, SWEEP.own
SWEPT_FILES = "swept_files"  # the manifest's record of the swept files' contents


def digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def file_digest(field: str, value: str | None, memo: dict | None = None) -> str | None:
    """The content hash of the file a run field names (a preset name is resolved first);
    ``memo`` keeps the hashes already taken in one sweep."""
    if memo is not None:
        if (field, value) not in memo:
            memo[field, value] = file_digest(field, value)
        return memo[field, value]
    path = path_of(field, value)
    if path is None:  # names no file
        return None
    try:
        return digest(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path), field=run_field(field)) from None


def identity(spec: Any, fields: tuple[str, ...] | None = None, memo: dict | None = None) -> dict[str, Any]:
    """What a run's (a ``RunSpec``'s or a ``ServeSpec``'s) result depends on: its parameters, its files'
    contents and the memsim version (only ``fields`` of them when given; ``memo``: see ``file_digest``)."""
    values = asdict(spec)
    names = fields if fields is not None else tuple(values)
    ident: dict[str, Any] = {name: values[name] for name in names}
    for name in FILE_FIELDS:
        if name in names:
            ident[f"{name}_content"] = file_digest(name, values[name], memo)
    ident["set"] = sorted(map(list, values["set"])) if "set" in names else None
    ident["memsim"] = __version__
    return ident


def run_key(spec: Any, memo: dict | None = None) -> str:
    return digest(json.dumps(identity(spec, memo=memo), sort_keys=True, default=str))


class Lock:
    """An exclusive lock on a folder for as long as a sweep writes it (released when the process dies)."""

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / ".lock"
        self.fh: TextIO | None = None

    def __enter__(self) -> Lock:
        import fcntl

        self.fh = fh = self.path.open("a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise ConfigError(f"another sweep is writing this folder; wait for it or use another {run_field('out')}",
                              file=str(self.path.parent), field=run_field("out")) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.fh is not None:
            self.fh.close()


def discard(out: Path, existed: bool) -> None:  # a sweep's
    """Remove what a sweep wrote in ``out`` (its own entries only), and ``out`` itself where the
    sweep made it and nothing else is left."""
    for name in OWN:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    if not existed and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def files_read(first: Any, sweeps: dict[str, list[str]]) -> list[Path]:
    """The files a sweep's points read: those its first point names, and every swept file value."""
    named = (path_of(f, v) for f in FILE_FIELDS for v in sweeps.get(f, [getattr(first, f, None)]))
    return [p for p in named if p is not None]


def check_folder(out: Path, inputs: Iterable[Path] = (), kind: Folder = SWEEP) -> None:
    """Refuse an ``--out`` that is a link, not a folder, a folder holding another kind's experiment
    or files of something other than this ``kind`` of experiment, or one holding a file the
    experiment reads (``inputs``); nothing is created."""
    held = folder_entries(out, run_field("out"))
    other = next((k for k in FOLDERS if k is not kind and k.manifest in held and kind.manifest not in held), None)
    if other is not None:
        raise ConfigError(f"holds {other.what} results ({other.manifest}), another experiment; use another "
                          f"{run_field('out')}", file=str(out), field=run_field("out"))
    temporary = tuple(f".{name}." for name in kind.own)  # an atomic write's, cut short by a kill
    foreign = [n for n in held if n not in kind.own and not n.startswith(temporary)]
    if foreign and kind.manifest not in held:
        raise ConfigError(f"holds {units.shown(foreign[0])}, which no {kind.noun} writes: give a new or empty folder",
                          file=str(out), field=run_field("out"))
    check_apart(Path(out), run_field("out"), inputs, "folder")
    check_writable_parent(Path(out) / MANIFEST, run_field("out"))


def claim(out: Path, experiment: dict[str, Any], kind: Folder = SWEEP) -> None:
    """Record ``experiment`` as the folder's, or refuse if the folder holds another one. Its
    ``swept_files`` (``field=value`` -> content hash) may grow, as values are added to a sweep,
    but a file whose content changed is refused."""
    manifest = Path(out) / kind.manifest
    files = dict(experiment.get(SWEPT_FILES, {}))
    if manifest.exists():
        try:
            held = json.loads(manifest.read_text())
        except (OSError, ValueError):
            raise ConfigError(f"unreadable; remove the folder or use another {run_field('out')}", file=str(manifest)) from None
        if not isinstance(held, dict):
            raise ConfigError(f"not {kind.what} record; remove the folder or use another {run_field('out')}",
                              file=str(manifest))
        held_files = held.pop(SWEPT_FILES, {})
        rest = {k: v for k, v in experiment.items() if k != SWEPT_FILES}
        if bool(held.get("serve")) != bool(rest.get("serve")):
            which = "serving sweep's" if held.get("serve") else "sweep of runs'"
            raise ConfigError(f"holds a {which} results, another experiment; use another {run_field('out')}",
                              file=str(out), field=run_field("out"))
        if held != rest:
            differ = sorted(k for k in {*held, *rest} if held.get(k) != rest.get(k))
            raise ConfigError(f"holds another experiment (it differs in {', '.join(differ)}); use another {run_field('out')}",
                              file=str(out), field=run_field("out"))
        changed = [k for k in files if k in held_files and held_files[k] != files[k]]
        if changed:
            raise ConfigError(f"{changed[0]}: the file changed since this sweep began, so a resume would mix its "
                              f"old and new results; use another {run_field('out')}", file=str(out), field=run_field("out"))
        if all(k in held_files for k in files):
            return
        experiment = {**rest, SWEPT_FILES: {**held_files, **files}}
    elif any((Path(out) / name).exists() for name in kind.own - {".lock", "points"}):
        raise ConfigError(f"holds results of an unknown experiment; use another {run_field('out')}", file=str(out),
                          field=run_field("out"))
    atomic_write_text(manifest, json.dumps(experiment, indent=2, sort_keys=True, default=str) + "\n")


class Log:
    """points.jsonl: one finished point a line, appended and fsynced, so a killed experiment resumes
    from it; a line a kill cut short is left out (that point runs again)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(row, dict) and "run_key" in row:
                        self.rows.append(row)

    def append(self, row: dict[str, Any]) -> None:
        torn = False  # a kill can leave a last line without its newline
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        with self.path.open("a") as fh:
            fh.write(("\n" if torn else "") + json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)


class Results:
    """points.jsonl (``Log``) and results.csv (appended; see the module) in ``out``."""

    def __init__(self, out: Path, fields: list[str], order: dict[str, int] | None = None) -> None:
        self.order = order if order is not None else {}  # run key -> position in the sweep, for the CSV's order
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = Log(self.out / "points.jsonl")
        self.rows = self.log.rows
        self.csv = self.out / "results.csv"
        self.fields = fields
        self.columns: list[str] | None = None  # results.csv's header as written
        self.skipped = 0  # points already done when this run started
        self.repeats = 0  # points that are another point's run

    def done(self) -> set[str]:
        return {r["run_key"] for r in self.rows}

    def add(self, row: dict[str, Any]) -> None:
        self.log.append(row)
        cells = [c for c in row if c != "run_key"]
        if self.columns is None or not self.csv.exists() or any(c not in self.columns for c in cells):
            self.write_csv()
            return
        with self.csv.open("a", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerow(_cells(row, self.columns))

    def write_csv(self) -> None:
        """results.csv whole, in the sweep's order."""
        rows = sorted(self.rows, key=lambda r: self.order.get(r["run_key"], len(self.order)))
        lead = [c for f in self.fields for c in (f, *(f + s for s, _ in NUMERIC.values() if any(f + s in r for r in rows)))]
        lead.append("error")
        seen = dict.fromkeys(c for r in rows for c in r if c != "run_key")
        self.columns = lead + [c for c in seen if c not in lead]
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(_cells(r, self.columns) for r in rows)
        atomic_write_text(self.csv, text.getvalue())


    def table(self, limit: int = 20) -> str:
        """The results as a compact console table, in the sweep's order: each swept value, the step time,
        its roofline and the largest stall (or the point's error); at most ``limit`` rows."""
        rows = sorted(self.rows, key=lambda r: self.order.get(r["run_key"], len(self.order)))
        lines = []
        for r in rows[:limit]:
            cells = [str(r.get(f, "")) for f in self.fields]
            if r.get("error") or "step_time_s" not in r:
                cells += ["failed", "", str(r.get("error") or r.get("changed", ""))[:60]]
            else:
                stalls = {k[len("stall_s."):]: v for k, v in r.items() if k.startswith("stall_s.") and v}
                top = max(stalls, key=stalls.__getitem__) if stalls else ""
                cells += [f"{r['step_time_s'] * 1e3:.4g}", f"{r.get('roofline_s', 0) * 1e3:.4g}",
                          f"{top} {stalls[top] * 1e3:.3g} ms" if top else ""]
            lines.append(cells)
        head = [*self.fields, "step ms", "roofline ms", "largest stall"]
        widths = [max(len(x) for x in col) for col in zip(head, *lines)]
        out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *lines]]
        if len(rows) > limit:
            out.append(f"... {len(rows) - limit} more rows in {self.csv}")
        return "\n".join(out)


def _cells(row: dict[str, Any], columns: list[str]) -> list[Any]:
    return ["" if row.get(c) is None else row[c] for c in columns]
