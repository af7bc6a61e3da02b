"""Every preset's chip links are declared per physical link, and all of them together are no
faster than the chip's published total (memsim/validation/data/hardware.csv)."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from memsim import hardware

HARDWARE_CSV = Path(__file__).resolve().parents[2] / "memsim" / "validation" / "data" / "hardware.csv"

# Per preset: its hardware.csv row, and how that row's interconnect_bw_GBps counts (read from
# its interconnect text): "bidirectional" totals are halved to compare with the per-direction
# bandwidth of `links[].bandwidth`.
PUBLISHED = {
    # "NVLink3 12 links, 600 GB/s total (bidirectional)"
    "a100-80gb-sxm": ("NVIDIA A100-80GB SXM4", "bidirectional"),
    # "NVLink4 900 GB/s total": NVIDIA's 900 GB/s counts both directions (450 GB/s each way)
    "h100-sxm": ("NVIDIA H100 SXM5 80GB", "bidirectional"),
    "h200-sxm": ("NVIDIA H200 SXM 141GB", "bidirectional"),
    # "NVLink5 1.8 TB/s per GPU": both directions (the csv's source: 2 x 900 GB/s)
    "b200": ("NVIDIA B200 (HGX, 1000 W)", "bidirectional"),
    # "7 links x 128 GB/s = 896 GB/s peer aggregate": 128 GB/s is a link's both directions
    "mi300x": ("AMD Instinct MI300X", "bidirectional"),
    # "1600 Gbps per chip = 400 GB/s bidirectional per chip"
    "tpu-v5e": ("Google TPU v5e", "bidirectional"),
    # notes: "interconnect_bw column = 2x400GbE = 100 GB/s total per direction (derived)"
    "wormhole-n150": ("Tenstorrent Wormhole n150 (1 ASIC)", "per direction"),
    # "16 chip-to-chip links x 4 lanes x 30 Gbps ... 480 GB/s total": 240 GB/s each way
    "groq-lpu": ("Groq LPU / TSP v1 (GroqChip)", "bidirectional"),
    # "System I/O 1.2 Tb/s (12x100GbE)": Ethernet rates are per direction
    "wse-2": ("Cerebras WSE-2 (CS-2)", "per direction"),
    "wse-3": ("Cerebras WSE-3 (CS-3)", "per direction"),
}
# No published chip total in hardware.csv: TPU v4 (per-link ICI bandwidth not verified), SN40L
# (peer RDU network not published), Xeon (UPI rate per link only), GB10 and M2 Ultra (links not
# collected), the Galaxy (no row: its links from runtime.csv and tt-metal's Galaxy test).
UNPUBLISHED = {"tpu-v4", "sn40l", "xeon-gold-6242", "gb10", "m2-ultra", "wormhole-galaxy"}


def rows() -> dict[str, dict[str, str]]:
    return {r["chip"]: r for r in csv.DictReader(HARDWARE_CSV.open())}


def test_every_preset_with_a_chip_link_is_listed():
    assert set(PUBLISHED) | UNPUBLISHED == set(hardware.presets())
    for row, _ in PUBLISHED.values():
        assert row in rows(), row


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_a_chips_links_together_are_no_faster_than_its_published_total(preset):
    row, counted = PUBLISHED[preset]
    total = float(rows()[row]["interconnect_bw_GBps"]) * 1e9
    per_direction = total / 2 if counted == "bidirectional" else total
    link = hardware.load(preset).interconnect
    assert link.count * link.bandwidth_bytes_per_s <= per_direction * (1 + 1e-9), (preset, link)
    # ...and the per-link declaration is no looser than a tenth below it (the links are the chip's).
    assert link.count * link.bandwidth_bytes_per_s >= 0.9 * per_direction, (preset, link)
