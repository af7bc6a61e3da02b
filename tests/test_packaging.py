"""What a regular install (not editable) carries: every shipped config folder and every data file the
package reads, as setup.cfg declares them. A folder left out is found only from a source checkout."""
from __future__ import annotations

import configparser
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    return cfg


def test_every_config_folder_is_installed_under_share():
    declared = {key: value.strip() for key, value in _setup()["options.data_files"].items()}
    for folder in sorted(p for p in (ROOT / "configs").iterdir() if p.is_dir()):
        files = [f for f in folder.iterdir() if f.is_file()]
        key = f"share/memsim/configs/{folder.name}"
        assert key in declared, f"setup.cfg's data_files leaves out configs/{folder.name}"
        pattern = declared[key].split("/", 2)[-1]
        assert all(fnmatch.fnmatch(f.name, pattern) for f in files), (folder.name, pattern)


def test_every_validation_data_file_is_package_data():
    patterns = [p.strip() for p in _setup()["options.package_data"]["memsim.validation"].split(",")]
    data = ROOT / "memsim" / "validation"
    files = [f.relative_to(data).as_posix() for f in (data / "data").rglob("*") if f.is_file()]
    assert files
    missing = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert missing == [], "setup.cfg's package_data leaves out these files"
