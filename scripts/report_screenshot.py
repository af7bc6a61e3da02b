#!/usr/bin/env python3
"""The HTML report's screenshot in the docs (docs/img/report.png): the README's quick-start run,
reported by `memsim report` and drawn by headless Chromium.

    python scripts/report_screenshot.py [--out docs/img/report.png]

Needs the report extra (plotly), websockets and a Chromium (Debian's `chromium`).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from memsim import simulate
from memsim.report.browser import open_page
from memsim.report.html import render

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "report.png")
    args = ap.parse_args(argv)
    result = simulate("h100-sxm", "llama-2-7b", phase="decode", batch=1, context=2048)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "llama2-decode"
        result.write(run)
        page = run / "report.html"
        page.write_text(render(run))
        shot = open_page(page.as_uri(), "document.body.dataset.figures", width=1100, height=1800, screenshot=True)
    if shot.errors:
        print(f"the page reported errors: {shot.errors}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(shot.screenshot)
    print(f"wrote {args.out} ({shot.value} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
