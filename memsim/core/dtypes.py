"""The data types memsim knows, by the names used in YAML, traces and on the command line, and
the storage size of one element of each, in bits.

Hardware (peaks per dtype) and workloads (tensor and op dtypes) both check names against this
one table, so a dtype is added in one place.
"""
from __future__ import annotations

# The block floating-point formats (Tenstorrent's bfloat8_b and bfloat4_b) give each element its sign and
# mantissa in these bits and each block of ``BLOCK_ELEMENTS`` one shared 8-bit exponent besides.
BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "bfp8": 8, "bfp4": 4}
DTYPES = tuple(BITS)
