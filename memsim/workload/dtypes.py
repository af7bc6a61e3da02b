"""Data types of a workload: bytes of a tensor, and the formats weights and the KV cache may be stored in."""
from __future__ import annotations

from memsim.core.dtypes import BITS, DTYPES

__all__ = ["BITS", "BLOCK_FORMATS", "DTYPES", "KV_DTYPES", "WEIGHT_DTYPES", "WEIGHT_ROLES", "nbytes", "recipe",
           "weight_storage_bytes"]

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "bfp8", "bfp4")
# Tensor classes of a model's weights a precision recipe names (``--precision mlp=bfp4,attention=bfp8``).
WEIGHT_ROLES = ("attention", "mlp", "lm_head", "embedding")
BLOCK_FORMATS = ("bfp8", "bfp4")
BLOCK_ELEMENTS = 16  # elements sharing one exponent byte (tt-metal's bfloat8_b / bfloat4_b: a 16-element row of a face)
KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")


def nbytes(numel: int, dtype: str) -> int:
    """Bytes to store ``numel`` elements of ``dtype``, rounded up to a whole byte."""
    return -(-numel * BITS[dtype] // 8)


QUANTIZED = ("int8", "int4")
SCALE_BYTES = 2  # scales and zero points are bf16


def weight_storage_bytes(shape: tuple[int, ...], dtype: str, group_size: int) -> int:
    """Bytes of a projection weight of ``shape`` (..., k, n) stored as ``dtype``, scales included.

    int8 keeps one scale per output channel; int4 keeps a scale and a zero point per group of
    ``group_size`` weights along k (GPTQ/AWQ style); a block floating-point format one exponent byte
    per ``BLOCK_ELEMENTS`` weights (bfp8: 8.5 bits a weight, bfp4: 4.5); fp8 and 16-bit formats none.
    """
    numel = 1
    for d in shape:
        numel *= d
    data = nbytes(numel, dtype)
    if dtype == "int8":
        return data + SCALE_BYTES * (numel // shape[-2])
    if dtype == "int4":
        return data + 2 * SCALE_BYTES * -(-numel // group_size)
    if dtype in BLOCK_FORMATS:
        return data + -(-numel // BLOCK_ELEMENTS)
    return data


def recipe(text: str | None) -> tuple[tuple[str, str], ...]:
    """A precision recipe, ``mlp=bfp4,attention=bfp8``, as sorted (class, format) pairs; errors name
    the class or format, and the caller the field."""
    if not text:
        return ()
    pairs: dict[str, str] = {}
    for item in str(text).split(","):
        role, sep, dtype = (part.strip() for part in item.partition("="))
        if not sep or role not in WEIGHT_ROLES or dtype not in WEIGHT_DTYPES:
            raise ValueError(f"{item.strip()!r}: expected CLASS=FORMAT, a class of {', '.join(WEIGHT_ROLES)} and a "
                             f"format of {', '.join(WEIGHT_DTYPES)}")
        if role in pairs:
            raise ValueError(f"{role} is given twice")
        pairs[role] = dtype
    return tuple(sorted(pairs.items()))
