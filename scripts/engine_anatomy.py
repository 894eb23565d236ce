"""Where a TensorRT-RTX plan's bytes go: generated CUDA source versus everything else (weights, binaries).

TensorRT-RTX compiles kernels just in time on the user's GPU, so a plan built on a CPU carries the
CUDA C source of every kernel its compiler generated (elementwise fusions, and the scale/bias/
activation/requantize epilogue of each INT8 or FP8 convolution), each with its own copy of a
~100 KB preamble. This script measures that part by scanning for printable runs holding that
source; the format is undocumented, so the split is an estimate and says so.

    python scripts/engine_anatomy.py build/*/*.engine
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SOURCE_MARKERS = (b"#include", b"__global__", b"using __myln_")
PRINTABLE_RUN = re.compile(rb"[\x20-\x7e\t\r\n]{256,}")


def anatomy(path: Path) -> dict:
    """Return the plan's size, the bytes of embedded kernel source, and the rest (weights, binaries, tables)."""
    data = path.read_bytes()
    source = sum(len(m.group(0)) for m in PRINTABLE_RUN.finditer(data)
                 if any(marker in m.group(0) for marker in SOURCE_MARKERS))
    return {"engine": str(path), "mb": len(data) / 1e6, "kernel_source_mb": source / 1e6,
            "rest_mb": (len(data) - source) / 1e6}


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    print(f"{'engine':60} {'MB':>7} {'source MB':>10} {'rest MB':>8}   (source: estimated by scanning)")
    for path in paths:
        row = anatomy(Path(path))
        print(f"{row['engine'][-60:]:60} {row['mb']:7.2f} {row['kernel_source_mb']:10.2f} {row['rest_mb']:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
