"""The shipped models as `make demo` leaves them (build/<model>/, models/<model>/data/): tests that
judge real models use them, and skip with the command to run when they are not there yet."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shipped(model: str, *files: str) -> Path:
    """Return build/<model>/, skipping the test unless `files` (in it) and the model's data exist."""
    build = ROOT / "build" / model
    missing = [f for f in files if not (build / f).exists()]
    if missing or not (ROOT / "models" / model / "data" / "val").is_dir():
        pytest.skip(f"build/{model}/{missing[0] if missing else ''} or models/{model}/data is missing: "
                    f"run 'make demo MODEL={model}' first")
    return build
