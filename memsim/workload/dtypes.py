"""Data types of a workload: bytes of a tensor, and the formats weights and the KV cache may be stored in."""
from __future__ import annotations

from memsim.dtypes import BITS, DTYPES

__all__ = ["BITS", "DTYPES", "KV_DTYPES", "WEIGHT_DTYPES", "nbytes", "weight_storage_bytes"]

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")


def nbytes(numel: int, dtype: str) -> int:
    """Bytes to store ``numel`` elements of ``dtype``, rounded up to a whole byte."""
    return -(-numel * BITS[dtype] // 8)


QUANTIZED = ("int8", "int4")
SCALE_BYTES = 2  # scales and zero points are bf16


def weight_storage_bytes(shape: tuple[int, ...], dtype: str, group_size: int) -> int:
    """Bytes of a projection weight of ``shape`` (..., k, n) stored as ``dtype``, scales included.

    int8 keeps one scale per output channel; int4 keeps a scale and a zero point per group of
    ``group_size`` weights along k (GPTQ/AWQ style); fp8 and 16-bit formats need none.
    """
    numel = 1
    for d in shape:
        numel *= d
    data = nbytes(numel, dtype)
    if dtype == "int8":
        return data + SCALE_BYTES * (numel // shape[-2])
    if dtype == "int4":
        return data + 2 * SCALE_BYTES * -(-numel // group_size)
    return data
