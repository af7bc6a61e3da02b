"""Experiments over many points: swept values, the results folder, and the runner for sweeps of runs
and of serving runs."""
