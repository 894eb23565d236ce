"""What the model export scripts share: deterministic torch, ONNX export, atomic data writes."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtpipe.files import write_bytes
from trtpipe.graph.onnxio import IR_VERSION

OPSET = 17


def parse_output() -> Path:
    parser = argparse.ArgumentParser(description="export the model to ONNX (and write its data directories)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    return parser.parse_args().output


# CPU kernels pick their code by instruction set, and the last bits of a sum depend on that code: the
# digits net trained for 2 epochs here had other weights with the instruction set capped at SSE4.1
# than at this machine's AVX2 (measured), and over 30 epochs that changes which of 450 test digits
# it gets right. Capping every library at AVX2 gives every AVX2 machine (any x86 server of the last
# decade, with AVX-512 or not) the same code, so the same bytes.
CPU_CAP = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}


def deterministic(seed: int = 0):
    """Return torch set up so that training gives the same weights run after run and machine to machine.

    The instruction-set cap is read when the libraries start, so it is set before torch is imported.
    One thread, deterministic algorithms and a seeded generator fix the rest of the order of sums
    (one and two threads gave the same weights here, measured; one thread is the safe choice).
    """
    if "torch" in sys.modules:  # harmless for an export without training; a training script must call this first
        warnings.warn("torch was imported before deterministic(): the CPU cap may not apply", stacklevel=2)
    for key, value in CPU_CAP.items():
        os.environ.setdefault(key, value)
    import torch

    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return torch


def export_onnx(module, example_inputs: tuple, output: Path, input_names, output_names, dynamic_axes) -> None:
    """Export with the TorchScript exporter (no onnxscript needed) at IR_VERSION, atomically."""
    import onnx
    import torch

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), example_inputs, buffer, dynamo=False, opset_version=OPSET,
                          input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                          do_constant_folding=True)
    model = onnx.load_from_string(buffer.getvalue())
    model.ir_version = min(model.ir_version, IR_VERSION)
    onnx.checker.check_model(model)
    write_bytes(output, model.SerializeToString())


def replace_dir(final: Path, fill) -> None:
    """Write a data directory with `fill(tmpdir)` and move it into place only when complete."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
