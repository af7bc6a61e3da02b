"""A sweep's results folder: which experiment it holds, which points are done, and who writes it.

A point is keyed by everything its result depends on: the resolved run (every ``RunSpec``
field, hardware overrides included), the content of the files it names (hardware, system,
model or trace) and the memsim version. The folder records its experiment in
``sweep.json``; a different experiment sent to the same folder is refused, never mixed in.
One sweep at a time writes a folder: the second finds its lock taken and stops.

Finished points are appended to ``points.jsonl`` (fsynced, the log a re-run resumes from) and
``results.csv`` is rewritten atomically after each one.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from memsim import __version__
from memsim.atomic import atomic_write_text
from memsim.errors import ConfigError
from memsim.inputs import FILE_FIELDS, path_of
from memsim.runspec import RunSpec

MANIFEST = "sweep.json"


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
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path), field=f"--{field}") from None


def identity(spec: RunSpec, fields: tuple[str, ...] | None = None, memo: dict | None = None) -> dict[str, Any]:
    """What a run's result depends on: its parameters, its files' contents and the memsim version
    (only ``fields`` of them when given; ``memo``: see ``file_digest``)."""
    values = asdict(spec)
    names = fields if fields is not None else tuple(values)
    ident: dict[str, Any] = {name: values[name] for name in names}
    for name in FILE_FIELDS:
        if name in names:
            ident[f"{name}_content"] = file_digest(name, values[name], memo)
    ident["set"] = sorted(map(list, values["set"])) if "set" in names else None
    ident["memsim"] = __version__
    return ident


def run_key(spec: RunSpec, memo: dict | None = None) -> str:
    return digest(json.dumps(identity(spec, memo=memo), sort_keys=True, default=str))


class Lock:
    """An exclusive lock on a folder for as long as a sweep writes it (released when the process dies)."""

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / ".lock"
        self.fh = None

    def __enter__(self) -> "Lock":
        import fcntl

        self.fh = self.path.open("a")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.close()
            raise ConfigError("another sweep is writing this folder; wait for it or use another --out",
                              file=str(self.path.parent), field="--out") from None
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def claim(out: Path, experiment: dict[str, Any]) -> None:
    """Record ``experiment`` as the folder's, or refuse if the folder holds another one."""
    manifest = Path(out) / MANIFEST
    if manifest.exists():
        try:
            held = json.loads(manifest.read_text())
        except (OSError, ValueError):
            raise ConfigError("unreadable; remove the folder or use another --out", file=str(manifest)) from None
        if held != experiment:
            differ = sorted(k for k in {*held, *experiment} if held.get(k) != experiment.get(k))
            raise ConfigError(f"holds another experiment (it differs in {', '.join(differ)}); use another --out",
                              file=str(out), field="--out")
        return
    if (Path(out) / "points.jsonl").exists() or (Path(out) / "results.csv").exists():
        raise ConfigError("holds results of an unknown experiment; use another --out", file=str(out), field="--out")
    atomic_write_text(manifest, json.dumps(experiment, indent=2, sort_keys=True, default=str) + "\n")


class Results:
    """points.jsonl (append-only, fsynced) and results.csv (rewritten atomically) in ``out``."""

    def __init__(self, out: Path, fields: list[str], order: dict[str, int] | None = None) -> None:
        self.order = order or {}  # run key -> position in the sweep, for the CSV's row order
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = self.out / "points.jsonl"
        self.fields = fields
        self.rows: list[dict[str, Any]] = []
        self.skipped = 0  # points already done when this run started
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut short by a kill: that point is simply run again
                    if isinstance(row, dict) and "run_key" in row:
                        self.rows.append(row)

    def done(self) -> set[str]:
        return {r["run_key"] for r in self.rows}

    def add(self, row: dict[str, Any]) -> None:
        torn = False  # a kill can leave a last line without its newline
        if self.log.exists() and self.log.stat().st_size:
            with self.log.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        with self.log.open("a") as fh:
            fh.write(("\n" if torn else "") + json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.write_csv()

    def write_csv(self) -> None:
        rows = sorted(self.rows, key=lambda r: self.order.get(r["run_key"], len(self.order)))
        df = pd.DataFrame(rows).drop(columns=["run_key"], errors="ignore")
        if df.empty:
            df = pd.DataFrame(columns=[*self.fields, "error"])
        lead = [*self.fields, "error"]
        df = df[lead + [c for c in df.columns if c not in lead]]
        atomic_write_text(self.out / "results.csv", df.to_csv(index=False))
