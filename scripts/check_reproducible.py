"""Export a shipped model twice from scratch, each in a fresh copy of its folder, and compare bytes.

    python scripts/check_reproducible.py digits      # `make check-reproducible MODEL=digits`

Each copy starts with no data directory, as a fresh clone does; the export writes its data and its
ONNX. Prints the sha256 of every file that differs (nothing, when the export is reproducible) and
exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def export_fresh(model: str, workdir: Path) -> dict[str, str]:
    """Copy models/common.py and models/<model> (without data) into `workdir`, export, return digests."""
    (workdir / "models").mkdir(parents=True)
    shutil.copy(ROOT / "models" / "common.py", workdir / "models")
    shutil.copytree(ROOT / "models" / model, workdir / "models" / model, ignore=shutil.ignore_patterns("data", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    start = time.perf_counter()
    subprocess.run([sys.executable, f"models/{model}/export.py", "-o", f"build/{model}.onnx"], cwd=workdir, env=env,
                   check=True)
    print(f"{workdir.name}: exported in {time.perf_counter() - start:.0f} s")
    return {**digests(workdir / "build"), **{f"data/{k}": v for k, v in digests(workdir / "models" / model / "data").items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="digits", help="a folder under models/ (default: digits)")
    model = parser.parse_args().model
    with tempfile.TemporaryDirectory(prefix="reproducible-") as tmp:
        first = export_fresh(model, Path(tmp) / "first")
        second = export_fresh(model, Path(tmp) / "second")
    differ = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
    for name in differ:
        print(f"differs: {name} {first.get(name, '-')[:16]} {second.get(name, '-')[:16]}")
    onnx = f"{model}.onnx"
    print(f"{model}: {len(first)} files, {len(differ)} differ; {onnx} sha256 {first.get(onnx, '-')[:16]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
