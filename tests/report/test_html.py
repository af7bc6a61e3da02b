"""The HTML report: one self-contained page that loads in a real headless Chromium with no console
error and draws every figure it holds (CI installs Debian's chromium: .ci/run)."""
from __future__ import annotations

import pytest

from memsim import simulate
from memsim.cli import main as cli
from memsim.report.browser import chromium
from memsim.report.html import render

FIGURES = ("[...document.querySelectorAll('.plotly-graph-div')].map(d => [d.id, d.querySelectorAll('svg.main-svg')"
           ".length, d.querySelectorAll('.trace').length])")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    simulate("h100-sxm", "gpt2", phase="decode", context=64).write(out)
    return out


def test_the_page_holds_the_run_and_needs_nothing_from_the_network(run_folder):
    page = render(run_folder)
    assert "<h2>Placement</h2>" in page and "<td>weight</td><td>hbm</td>" in page
    for div in ("stalls", "timeline-0", "roofline", "energy"):
        assert f'id="{div}"' in page, div
    assert "<script src=" not in page and page.count("<script>") >= 5  # plotly.js inlined once, no fetch
    assert page.count("Plotly.newPlot") == 4


def test_the_page_loads_in_headless_chromium_with_no_errors_and_draws_every_figure(run_folder):
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    pytest.importorskip("websockets", reason="the dev extra (websockets) is not installed")
    from memsim.report.browser import open_page

    path = run_folder / "report.html"
    path.write_text(render(run_folder))
    page = open_page(path.as_uri(), f"[document.body.dataset.figures, {FIGURES}]", screenshot=True)
    assert page.errors == []
    count, drawn = page.value
    assert int(count) == len(drawn) == 4
    for div, svgs, traces in drawn:
        assert svgs >= 1 and traces >= 1, div
    assert page.screenshot[:4] == b"\x89PNG" and len(page.screenshot) > 20_000


def test_a_page_with_a_script_error_is_caught(tmp_path):
    """The check above can fail: an uncaught exception and a console error are both reported."""
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    pytest.importorskip("websockets", reason="the dev extra (websockets) is not installed")
    from memsim.report.browser import open_page

    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('drawn wrong'); missing();</script></body></html>")
    page = open_page(bad.as_uri())
    assert "drawn wrong" in page.errors[0] and "missing is not defined" in page.errors[1]


def test_memsim_report_writes_the_page_and_refuses_a_folder_that_is_no_run(monkeypatch, capsys, tmp_path, run_folder):
    def cli_run(*args):
        monkeypatch.setattr("sys.argv", ["memsim", *args])
        try:
            cli.entry()
        except SystemExit as exc:
            return exc.code, capsys.readouterr()
        return 0, capsys.readouterr()

    code, io = cli_run("report", str(run_folder), "-o", str(tmp_path / "page.html"))
    assert code == 0 and (tmp_path / "page.html").read_text().startswith("<!doctype html>")
    (tmp_path / "empty").mkdir()
    code, io = cli_run("report", str(tmp_path / "empty"))
    assert code == 2 and "not a folder memsim writes: a run's (summary.json" in io.err
    assert list((tmp_path / "empty").iterdir()) == []
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "summary.json").write_text("{}")
    code, io = cli_run("report", str(tmp_path / "half"))
    assert code == 2 and io.err.strip().endswith("missing timeline.csv: not a memsim run folder")


# What a hostile run folder may hold in any text field: each would run script if it reached the page raw.
def payload(where: str) -> str:
    return (f"</script><script>window.__pwned='{where}'</script><img src=x onerror=\"window.__pwned='{where}'\">"
            f"\"'><svg onload=\"window.__pwned='{where}'\"><a href=\"javascript:window.__pwned='{where}'\">x</a>")


def _hostile(value, where: str, names: bool = False):
    """Every string in a JSON value replaced by a payload naming where it was; with ``names``, a
    mapping's keys too (the keys that name things: placements, stall causes, energy parts)."""
    if isinstance(value, str):
        return payload(where)
    if isinstance(value, list):
        return [_hostile(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        named = names or where.endswith(("placement", "stall_s", "parts"))
        return {(payload(f"{where}.{k}") if named else k): _hostile(v, f"{where}.{k}", named and isinstance(v, dict))
                for k, v in value.items()}
    return value


def test_hostile_strings_in_every_field_of_a_run_folder_run_no_script(run_folder, tmp_path):
    """Every text cell of timeline.csv and ops.csv, every string of summary.json and the chip's name
    become markup that runs script if it is not escaped: the page either refuses the folder in one
    line or loads with no script of theirs run and no element of theirs made."""
    import json
    import shutil

    import pandas as pd
    import yaml

    folder = tmp_path / "hostile"
    shutil.copytree(run_folder, folder)
    for name in ("timeline.csv", "ops.csv"):
        table = pd.read_csv(folder / name)
        for column in table.columns:  # text, or empty (a cell a reader may take as text)
            if not pd.api.types.is_numeric_dtype(table[column]) or table[column].isna().all():
                table[column] = [payload(f"{name}:{column}:{i % 3}") for i in range(len(table))]
        table.to_csv(folder / name, index=False)
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps(_hostile(summary, "summary")))
    chip = yaml.safe_load((folder / "hardware.yaml").read_text())
    chip["name"] = payload("hardware.name")
    (folder / "hardware.yaml").write_text(yaml.safe_dump(chip))
    page = render(folder)  # text is text: nothing here is refused
    assert "<script>window.__pwned" not in page and "<img src=x" not in page and "<svg onload" not in page
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    pytest.importorskip("websockets", reason="the dev extra (websockets) is not installed")
    from memsim.report.browser import open_page

    path = folder / "report.html"
    path.write_text(page)
    seen = open_page(path.as_uri(), "[String(window.__pwned), document.querySelectorAll('img, svg[onload], "
                                    "a[href^=javascript]').length, document.body.dataset.figures]")
    pwned, made, figures = seen.value
    assert pwned == "undefined" and made == 0 and int(figures) >= 3, seen.value


def test_the_summary_reads_as_the_console_does_each_figure_with_its_unit(run_folder):
    import json

    s = json.loads((run_folder / "summary.json").read_text())
    page = render(run_folder)
    assert f"<td>step time</td><td>{s['step_time_s'] * 1e3:.4f} ms</td>" in page
    assert "<td>workload</td><td>gpt2  decode  batch=1 tokens=1 context=64; weight bf16, kv bf16</td>" in page
    summary = page.split("<h2>Summary</h2>")[1].split("<h2>Placement")[0]
    assert "model=" not in summary and 'class="n"' not in summary  # no repr-style cell, no bare float
