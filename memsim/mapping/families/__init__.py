"""One mapping strategy per accelerator family; each module registers itself by name."""
