"""How far a candidate is from the FP32 baseline: metrics, validation and per-layer sensitivity."""
