"""Download every wheel (and pycuda's sdist) that `pip install 'trtpipe[gpu]'` needs, for a named
Python version and platform, plus install.sh that installs them on a machine without internet."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SDIST_ONLY = ["pycuda"]  # compiled on the GPU host against its CUDA
BUILD_TOOLS = ["setuptools", "wheel", "numpy"]  # pycuda's isolated build needs them, offline too


def pip_download(args: list[str], out: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(out), *args]
    if subprocess.run(cmd, check=False).returncode != 0:
        raise SystemExit(f"wheelhouse: pip download failed: {' '.join(args)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64")
    parser.add_argument("--extras", default="gpu")
    parser.add_argument("-o", "--output", type=Path, default=Path("wheelhouse"))
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt",
                        help="pins the wheels to what `make test` ran with (the lock); 'none' for the newest releases")
    args = parser.parse_args()
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    target = ["--python-version", args.python_version, "--implementation", "cp", "--platform", args.platform,
              "--platform", "manylinux_2_17_x86_64" if "x86_64" in args.platform else "manylinux_2_17_aarch64",
              "--platform", "manylinux2014_x86_64" if "x86_64" in args.platform else "manylinux2014_aarch64"]
    # Binary wheels, with everything they need, for the requirements of trtpipe and the extras;
    # pycuda's own needs (pytools, mako, ...) are named so they come as wheels too.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    extras = list(filter(None, args.extras.split(",")))
    while extras:  # an extra may name others of trtpipe's own ('trtpipe[pipeline]')
        for requirement in project["optional-dependencies"][extras.pop()]:
            if requirement.startswith("trtpipe["):
                extras += requirement[len("trtpipe["):-1].split(",")
            elif requirement not in requirements:
                requirements.append(requirement)
    binary = [r for r in requirements if not any(r.startswith(name) for name in SDIST_ONLY)]
    binary += BUILD_TOOLS + ["pytools", "platformdirs", "mako", "siphash24", "typing-extensions"]
    # The lock, so that the machine without internet gets the releases the tests ran against, not
    # whatever is newest that day (ml_dtypes 0.7 once broke a fresh clone).
    pins = [] if str(args.constraints) == "none" else ["--constraint", str(args.constraints)]
    pip_download(["--only-binary=:all:", *target, *pins, *binary], out)
    pip_download(["--no-deps", *pins, *(f"--no-binary={name}" for name in SDIST_ONLY), *SDIST_ONLY], out)
    # trtpipe itself, as a wheel built here.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)], check=True)
    script = out / "install.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "# Installs trtpipe[gpu] from this directory without internet; arguments go to pip (e.g. --target DIR).\n"
        "# pycuda compiles here against the local CUDA (set CUDA_ROOT if nvcc is not on PATH), in pip's\n"
        "# isolated build environment made from this directory, so the host's own setuptools stay as they are.\n"
        "set -euo pipefail\nhere=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\n"
        "python3 -m pip install --no-index --find-links \"$here\" \"$@\" pycuda\n"
        "python3 -m pip install --no-index --find-links \"$here\" \"$@\" 'trtpipe[gpu]'\n"
    )
    script.chmod(0o755)
    print(f"wheelhouse: {len(list(out.iterdir()))} files in {out}; install with {script}")


if __name__ == "__main__":
    main()
