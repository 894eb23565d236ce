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


def deterministic(seed: int = 0):
    """Return torch set up so that training gives the same weights on every machine.

    One thread: CPU kernels split their sums by thread, so the thread count changes the last bits
    of every gradient and, over 30 epochs, which of 450 digits the net gets right (a 16-core
    machine and a 2-core one trained nets of 99.56% and 99.33%). MKL's conditional numerical
    reproducibility mode keeps its results the same across CPU instruction sets.
    """
    os.environ.setdefault("MKL_CBWR", "COMPATIBLE")  # read when MKL starts: before torch is imported
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
