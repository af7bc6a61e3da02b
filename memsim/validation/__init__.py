"""Validation against published measurements: calibration rows, their fit, and microbenchmarks.

``calibration`` turns a row of ``calibration.csv`` into a simulation; ``fit`` fits the calibrated
parameters and measures accuracy out of sample (leave one source out); ``microbench`` reproduces
the GEMM and memory-bandwidth rows of ``microbench.csv`` with single-operator simulations.
"""
from memsim.validation import calibration, fit, microbench

__all__ = ["calibration", "fit", "microbench"]
