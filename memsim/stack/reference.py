"""The stack fields reference (``docs/stack-fields.md``), generated from ``StackSpec``'s field
metadata by the hardware reference's generator, so the page cannot miss a field."""
from __future__ import annotations

from memsim.hardware.reference import fields_page
from memsim.stack.spec import StackSpec


def reference() -> str:
    return fields_page(StackSpec, "Stack fields", [
        "Every field of a runtime stack's YAML (`configs/stacks/*.yaml`), generated from the field declarations "
        "in `memsim/stack/spec.py` by `python scripts/reference.py --write`; `tests/stack/test_stacks.py` keeps "
        "it current. What a stack is, the shipped ones and what each rests on: [stacks.md](stacks.md). A field "
        "a file leaves out takes the default here, which adds nothing (the `ideal` stack).", ""], "stack")
