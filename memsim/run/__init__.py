"""One run: its declared spec, the chip and stack it loads, the pipeline in one call, and what is built
on runs (generation, speculative decoding, the power cap, sensitivity and explain)."""
