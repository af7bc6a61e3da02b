"""The HTML report: one self-contained page that loads in a real headless Chromium with no console
error and draws every figure it holds (CI installs Debian's chromium: .ci/run)."""
from __future__ import annotations

import pytest

from memsim import cli, simulate
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
    for div in ("stalls", "timeline-chip0", "roofline", "energy"):
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
    assert code == 2 and io.err.strip().endswith("missing summary.json: not a memsim run folder")
    assert list((tmp_path / "empty").iterdir()) == []
