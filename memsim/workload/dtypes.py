"""Data types: storage size of each element, in bits."""
from __future__ import annotations

BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")


def nbytes(numel: int, dtype: str) -> int:
    """Bytes to store ``numel`` elements of ``dtype``, rounded up to a whole byte."""
    return -(-numel * BITS[dtype] // 8)
