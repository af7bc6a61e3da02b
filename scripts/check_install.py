#!/usr/bin/env python3
"""Checks that an install pulls no GPU stack and no notebook stack: pip resolves the requirement
(default: the README's test command, ``.[dev]``) from scratch, without installing it, and this exits
1 naming any ``nvidia-*``, ``triton``, ``torch`` or JupyterLab/notebook package in the resolution.
Run: python scripts/check_install.py [REQUIREMENT]  (.ci/run runs it)."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# torch from PyPI is its CUDA build (with triton and the nvidia-* wheels); the notebook stack came with mlc-chakra.
FORBIDDEN = re.compile(r"^(nvidia-.*|triton|torch|jupyterlab|jupyter-server|notebook|ipykernel|nbconvert)$")


def resolved(requirement: str) -> list[str]:
    """The names (normalised) of every package pip would install for the requirement into an empty environment."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                        "--report", str(report), requirement], cwd=ROOT, check=True)
        install = json.loads(report.read_text())["install"]
    return sorted(re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower() for item in install)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("requirement", nargs="?", default=".[dev]")
    args = ap.parse_args(argv)
    names = resolved(args.requirement)
    bad = [n for n in names if FORBIDDEN.match(n)]
    print(f"{args.requirement}: {len(names)} packages" + (f"; refused: {', '.join(bad)}" if bad else ", none refused"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
