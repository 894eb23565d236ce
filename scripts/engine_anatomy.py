"""Where a TensorRT-RTX plan's bytes go: generated CUDA source, zeros, and everything else (weights, binaries).

TensorRT-RTX compiles kernels just in time on the user's GPU, so a plan built on a CPU carries the
CUDA C source of every kernel its compiler generated (elementwise fusions, and the scale/bias/
activation/requantize epilogue of each INT8 or FP8 convolution), each with its own copy of a
~130 KB preamble. One source is stored once per kernel instance: two layers of one shape whose
requantization scales differ get two identical copies ("duplicate"). Constant tensors of zeros
(the channel padding of a quantized depthwise conv at a static shape) show as "zeros". The format
is undocumented, so the split is an estimate found by scanning, and says so.

    python scripts/engine_anatomy.py build/*/*.engine
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

SOURCE_MARKERS = (b"#include", b"__global__", b"using __myln_")
PRINTABLE_RUN = re.compile(rb"[\x20-\x7e\t\r\n]{256,}")
ZERO_RUN = re.compile(rb"\x00{4096,}")


def kernel_sources(data: bytes) -> list[bytes]:
    """Return the CUDA sources embedded in a plan, in plan order."""
    return [m.group(0) for m in PRINTABLE_RUN.finditer(data) if any(marker in m.group(0) for marker in SOURCE_MARKERS)]


def anatomy(path: Path) -> dict:
    """Return the plan's size and its parts: kernel source (and how much of it repeats), zeros, the rest."""
    data = path.read_bytes()
    sources = kernel_sources(data)
    distinct = {hashlib.sha256(s).hexdigest(): len(s) for s in sources}
    source = sum(map(len, sources))
    zeros = sum(len(m.group(0)) for m in ZERO_RUN.finditer(data))
    return {"engine": str(path), "mb": len(data) / 1e6, "kernel_source_mb": source / 1e6,
            "kernels": len(sources), "distinct_kernels": len(distinct),
            "duplicate_source_mb": (source - sum(distinct.values())) / 1e6,
            "zeros_mb": zeros / 1e6, "rest_mb": (len(data) - source - zeros) / 1e6}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.strip().splitlines()[-1].strip())
    parser.add_argument("engines", nargs="+", type=Path, help="TensorRT-RTX plans (.engine)")
    paths = parser.parse_args(argv).engines
    missing = next((p for p in paths if not p.is_file()), None)
    if missing is not None:
        print(f"engine_anatomy: {missing}: not a file; pass built plans (make zoo writes build/zoo/*/engines/*.engine)",
              file=sys.stderr)
        return 2
    print(f"{'engine':52} {'MB':>7} {'source MB':>10} {'kernels':>8} {'distinct':>9} {'dup MB':>7} {'zeros MB':>9} {'rest MB':>8}")
    for path in paths:
        row = anatomy(path)
        print(f"{row['engine'][-52:]:52} {row['mb']:7.2f} {row['kernel_source_mb']:10.2f} {row['kernels']:8d} "
              f"{row['distinct_kernels']:9d} {row['duplicate_source_mb']:7.2f} {row['zeros_mb']:9.2f} {row['rest_mb']:8.2f}")
    print("(source, duplicates and zeros estimated by scanning the plan; rest: weights, binaries, tables)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
