"""Workload: the operator DAG, builders from model configs, and the trace file."""
from __future__ import annotations

from memsim.core.presets import available, resolve
from memsim.workload.builder import StepSpec, build_step, split
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta
from memsim.workload.models import ModelConfig, load_model
from memsim.workload.trace import read_trace, write_trace

MODEL_SUFFIXES = (".json",)


def model_config(name_or_path: str) -> ModelConfig:
    return load_model(resolve(name_or_path, "models", MODEL_SUFFIXES))


def models() -> list[str]:
    return available("models", MODEL_SUFFIXES)


__all__ = [
    "ModelConfig",
    "Op",
    "OpGraph",
    "Read",
    "StepMeta",
    "StepSpec",
    "Tensor",
    "build_step",
    "load_model",
    "model_config",
    "models",
    "read_trace",
    "split",
    "write_trace",
]
