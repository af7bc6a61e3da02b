"""Report: summary, tables and files built from the engine's records; never the reverse."""
from __future__ import annotations

from memsim.report.frames import TIMELINE_COLUMNS, flatten, ops, timeline
from memsim.report.output import DATA, FIGURES, REPORT, check_target, write_outputs
from memsim.report.perfetto import perfetto, perfetto_json
from memsim.report.summary import summarize
from memsim.report.summary_fields import Summary

__all__ = ["DATA", "FIGURES", "REPORT", "TIMELINE_COLUMNS", "Summary", "check_target", "flatten", "ops", "perfetto",
           "perfetto_json", "summarize", "timeline", "write_outputs"]
