"""memsim report of every folder memsim writes: a serving run's, a capacity search's, a sweep's (with a
page for each point it kept, all loading one plotly.js) and an explain experiment's; each page loads in
headless Chromium with no error and draws its figures."""
from __future__ import annotations

import json

import pytest

import memsim
from memsim.core.errors import ConfigError
from memsim.report import folders
from memsim.report.browser import chromium
from tests.cli.test_cli import run_cli
from tests.conftest import TINY_MODEL
from tests.report.test_html import FIGURES

pytest.importorskip("plotly")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    model = root / "tiny.json"
    model.write_text(json.dumps({**TINY_MODEL, "max_position_embeddings": 8192}))
    memsim.serve("h100-sxm", str(model), rate=50, count=40, prompt=32, output_tokens=8, check=0).write(root / "serve")
    from memsim.serving.capacity import CapacitySpec, find
    from memsim.serving.spec import ServeSpec

    find(ServeSpec(hw="h100-sxm", model=str(model), prompt=32, output_tokens=8, check=0),
         CapacitySpec(duration=0.5, warmup=0.05, start=4, most=8, bisect=0)).write(root / "capacity")
    return root, model


def test_each_kind_of_folder_is_told_apart_and_a_stranger_is_one_line(made, tmp_path):
    root, _ = made
    assert folders.kind_of(root / "serve") == "serve" and folders.kind_of(root / "capacity") == "capacity"
    with pytest.raises(ConfigError, match="not a folder memsim writes"):
        folders.kind_of(tmp_path)


def test_a_sweep_writes_a_page_for_each_kept_point_and_one_plotly_for_all(monkeypatch, capsys, made, tmp_path):
    _, model = made
    out = tmp_path / "sweep"
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--model", str(model), "--context", "32", "--set",
                           "batch=1,2", "--keep", "--workers", "1", "--out", str(out))
    assert code == 0, err
    code, stdout, err = run_cli(monkeypatch, capsys, "report", str(out))
    assert code == 0, err
    pages = sorted(out.glob("points/*/report.html"))
    assert len(pages) == 2 and (out / folders.PLOTLY).stat().st_size > 1_000_000
    for point in pages:  # each loads the folder's one copy, inlines none
        text = point.read_text()
        assert "<script src='../../plotly.min.js'></script>" in text and len(text) < 1_000_000
    sweep = (out / "report.html").read_text()
    assert "<script src='plotly.min.js'></script>" in sweep and sweep.count('<a href="points/') == 2
    assert f"wrote {out / 'report.html'}" in stdout


def test_every_page_loads_in_headless_chromium_and_draws_its_figures(made):
    if chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    pytest.importorskip("websockets", reason="the dev extra (websockets) is not installed")
    from memsim.report.browser import open_page

    root, _ = made
    for name, figures in (("serve", 2), ("capacity", 1)):
        path = folders.write(root / name)[0]
        page = open_page(path.as_uri(), f"[document.body.dataset.figures, {FIGURES}]")
        assert page.errors == [], name
        count, drawn = page.value
        assert int(count) == len(drawn) == figures, name
        assert all(svgs >= 1 and traces >= 1 for _, svgs, traces in drawn), name


def test_a_serving_page_says_what_was_served(made):
    root, _ = made
    text = folders.render(root / "serve")
    assert "<td>served</td>" in text and "req/s" in text and "ITL" in text and 'id="latency"' in text
