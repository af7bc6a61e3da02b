"""The reference docs: every generated page is current, every page is in the site's nav, and the
site builds in MkDocs' strict mode (a broken link or anchor fails)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_every_generated_page_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "reference.py")], check=False, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def _nav(items) -> list[str]:
    out = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_nav():
    nav = _nav(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert sorted(nav) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], check=False, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
