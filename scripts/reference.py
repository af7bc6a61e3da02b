#!/usr/bin/env python3
"""Writes the reference pages in docs/ from the code's declarations. Run: python scripts/reference.py --write
(without --write: exit 1 if a page is not current, naming it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memsim.cli.reference import reference as cli_reference
from memsim.hardware.reference import reference as hardware_reference
from memsim.report.columns import reference as columns_reference
from memsim.report.summary_fields import reference as summary_reference
from memsim.run.explain import reference as explain_reference
from memsim.serving.capacity import reference as capacity_reference
from memsim.serving.summary import reference as serve_reference
from memsim.stack.reference import reference as stack_reference
from memsim.sweep.explain_serve import reference as explain_serve_reference
from memsim.workload.trace_schema import reference as trace_reference

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = {"summary.md": summary_reference, "explain.md": lambda: explain_reference() + explain_serve_reference(),
         "cli.md": cli_reference, "capacity.md": capacity_reference,
         "hardware-fields.md": hardware_reference,
         "stack-fields.md": stack_reference, "columns.md": columns_reference, "trace-schema.md": trace_reference,
         "serve-json.md": serve_reference}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the pages (else: check them)")
    args = ap.parse_args(argv)
    stale = []
    for name, make in PAGES.items():
        path, text = DOCS / name, make()
        if args.write:
            DOCS.mkdir(exist_ok=True)
            path.write_text(text)
        elif not path.is_file() or path.read_text() != text:
            stale.append(name)
    if stale:
        print(f"not current: {', '.join(stale)} (python scripts/reference.py --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
