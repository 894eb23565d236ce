"""Compute capabilities: read from the local GPU or named, and which precisions each one runs."""

from __future__ import annotations

import enum
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from trtpipe.errors import TrtpipeError


class Precision(str, enum.Enum):
    """Engine precisions, from widest to narrowest."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    FP8 = "fp8"
    INT4 = "int4"  # weight-only: INT4 weights, FP16 activations
    FP4 = "fp4"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str, flag: str = "--precision") -> Precision:
        try:
            return cls(text.lower())
        except ValueError:
            names = ", ".join(p.value for p in cls)
            raise TrtpipeError(f"{flag} {text}: unknown precision; use one of {names}") from None

    @property
    def quantized(self) -> bool:
        """True for precisions that need scales from a calibration cache (Q/DQ)."""
        return self in (Precision.INT8, Precision.FP8, Precision.FP4)


# Minimum compute capability at which the hardware runs each precision natively.
HARDWARE_MINIMUM: dict[Precision, tuple[int, int]] = {
    Precision.FP32: (0, 0),
    Precision.TF32: (8, 0),
    Precision.FP16: (5, 3),
    Precision.BF16: (8, 0),
    Precision.INT8: (6, 1),
    Precision.FP8: (8, 9),
    Precision.INT4: (8, 0),  # weight-only INT4 GEMMs (dequantize in the kernel): Ampere and newer
    Precision.FP4: (10, 0),
}

# Marketing names users type, normalized (upper case, no spaces, no vendor words).
GPU_CAPABILITIES: dict[str, tuple[int, int]] = {
    "V100": (7, 0), "T4": (7, 5), "RTX2080TI": (7, 5),
    "A100": (8, 0), "A30": (8, 0), "A800": (8, 0),
    "A10": (8, 6), "A10G": (8, 6), "A40": (8, 6), "A16": (8, 6), "A2": (8, 6),
    "RTXA6000": (8, 6), "RTX3090": (8, 6), "RTX3080": (8, 6), "RTX3070": (8, 6), "RTX3060": (8, 6),
    "JETSONORIN": (8, 7), "ORIN": (8, 7),
    "L4": (8, 9), "L40": (8, 9), "L40S": (8, 9), "RTX6000ADA": (8, 9),
    "RTX4090": (8, 9), "RTX4080": (8, 9), "RTX4070": (8, 9), "RTX4060": (8, 9),
    "H100": (9, 0), "H200": (9, 0), "H800": (9, 0), "H20": (9, 0), "GH200": (9, 0),
    "B200": (10, 0), "B100": (10, 0), "GB200": (10, 0), "B300": (10, 3), "GB300": (10, 3),
    "RTX5090": (12, 0), "RTX5080": (12, 0), "RTX5070": (12, 0), "RTX5060": (12, 0),
    "RTXPRO6000": (12, 0), "GB10": (12, 1), "DGXSPARK": (12, 1),
}


def _normalize_name(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100': vendor words and memory or form-factor words dropped."""
    noise = re.compile(r"NVIDIA|GEFORCE|TESLA|PCIE|SXM\d?|NVL|\d+GB|HBM\d?E?")
    return "".join(t for t in re.split(r"[\s_-]+", name.upper()) if t and not noise.fullmatch(t))


@dataclass(frozen=True)
class Target:
    """A compute capability, with the GPU name it was read from or named by, when known."""

    major: int
    minor: int
    name: str | None = None

    @property
    def sm(self) -> str:
        """The short form used in file names: 'sm89'."""
        return f"sm{self.major}{self.minor}"

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        text = f"sm_{self.major}{self.minor} (compute capability {self.major}.{self.minor})"
        return f"{self.name}, {text}" if self.name else text

    def hardware_supports(self, precision: Precision) -> bool:
        return self.capability >= HARDWARE_MINIMUM[precision]

    @classmethod
    def parse(cls, text: str, flag: str = "--target") -> Target:
        """Return the target named by `sm_90`, `sm90`, `9.0`, a GPU name, or `auto` (the local GPU)."""
        spec = text.strip()
        if spec.lower() == "auto":
            return local_target()
        match = re.fullmatch(r"(?:sm_?|compute_?)?(\d{1,2})(\d)[a-z]?", spec.lower())
        if match and not re.fullmatch(r"\d+\.\d+", spec):
            return cls(int(match.group(1)), int(match.group(2)))
        match = re.fullmatch(r"(\d{1,2})\.(\d)", spec)
        if match:
            return cls(int(match.group(1)), int(match.group(2)))
        key = _normalize_name(spec)
        if key in GPU_CAPABILITIES:
            return cls(*GPU_CAPABILITIES[key], name=spec)
        raise TrtpipeError(
            f"{flag} {text}: unknown target; use sm_XY (sm_89), a compute capability (8.9), "
            "a GPU name (L4, H100, RTX 4090) or auto"
        )


def local_target() -> Target:
    """Return the target of CUDA device 0, the GPU TensorRT and the runtime use, or raise when there is none.

    Read through the CUDA driver (pycuda) when it is installed. Else nvidia-smi, which numbers GPUs
    by PCI bus and ignores CUDA_VISIBLE_DEVICES, is asked for the GPU that variable names first
    (an index there is CUDA's, which matches nvidia-smi's under CUDA_DEVICE_ORDER=PCI_BUS_ID; a UUID always does).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = visible.split(",")[0].strip() if visible is not None else None
    if first in ("", "-1"):
        raise TrtpipeError(f"--target auto: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU; "
                           "name a target, e.g. --target sm_89")
    target = _cuda_device0()
    if target is not None:
        return target
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise TrtpipeError(
            "--target auto: no NVIDIA GPU found on this machine (nvidia-smi is not on PATH); "
            "name the GPU you deploy on, e.g. --target sm_89 or --target L4"
        )
    select = [f"--id={first}"] if first is not None else []
    try:
        out = subprocess.run(
            [smi, *select, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        raise TrtpipeError(f"--target auto: nvidia-smi failed ({exc}); name a target, e.g. --target sm_89") from None
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        raise TrtpipeError("--target auto: nvidia-smi lists no GPU; name a target, e.g. --target sm_89")
    name, cap = (part.strip() for part in lines[0].rsplit(",", 1))
    major, minor = cap.split(".")
    return Target(int(major), int(minor), name=name)


def _cuda_device0() -> Target | None:
    """Return CUDA device 0 as CUDA itself numbers it (after CUDA_VISIBLE_DEVICES), or None without pycuda or a driver."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return None
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            return None
        device = cuda.Device(0)
        major, minor = device.compute_capability()
        return Target(major, minor, name=device.name())
    except cuda.Error:
        return None
