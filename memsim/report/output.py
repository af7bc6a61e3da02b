"""Writing a run's outputs: all files appear together or none do."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml


def write_outputs(out: Path, summary: dict[str, Any], ops: pd.DataFrame, timeline: pd.DataFrame,
                  hardware: dict[str, Any], extra: dict[str, str] | None = None) -> list[Path]:
    """Write into a temporary folder beside ``out``, then move the files into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
        ops.to_csv(tmp / "ops.csv", index=False)
        timeline.to_csv(tmp / "timeline.csv", index=False)
        (tmp / "hardware.yaml").write_text(yaml.safe_dump(hardware, sort_keys=False))
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        out.mkdir(exist_ok=True)
        names = sorted(p.name for p in tmp.iterdir())
        for name in names:
            os.replace(tmp / name, out / name)
        return [out / n for n in names]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")
