"""What PyTriton's bundled Triton needs from this process before it starts, and port checks.

PyTriton runs Triton as a child process, and Triton runs each Python-backend model in a stub that
embeds Python. Two things of this machine break that stub unless the child's environment fixes them:

- The stub links `libpython3.11.so` by name. A pyenv or conda interpreter is not the system's one,
  and the system's library (Debian 3.11.2 here) loaded with the venv's 3.11.7 standard library fails
  at model load (`'_thread.RLock' object has no attribute '_recursion_count'`). The interpreter's own
  LIBDIR first on LD_LIBRARY_PATH makes the stub load the matching library.
- The stub's pybind11 predates numpy 2's ABI: under numpy 2 it reads input tensors wrong and writes
  empty outputs (measured: [1, 2, 3] arrived as [1, 1, 1]). nvidia-pytriton pins numpy<2 for that
  reason; where this process has numpy 2, the stub is given a numpy 1.x of its own (the stub runs
  Python isolated, ignoring PYTHONPATH, so a .pth file in site-packages adds the directory named by
  TRTPIPE_TRITON_STUB_SITE, and only processes that have that variable see it). Every compiled
  package the stub imports that needs numpy 2 gets a numpy 1.x build there too: ml_dtypes 0.7 does
  (onnx imports it, and OnnxRunner imports onnx), so the stub gets ml_dtypes 0.5.4.

Only the child sees these variables: server_environment() returns them for it, and this process
read its own environment when it started.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.log import configure

log = logging.getLogger(__name__)

STUB_SITE_VARIABLE = "TRTPIPE_TRITON_STUB_SITE"
STUB_PTH = "trtpipe_triton_stub.pth"
# One line, as .pth files need: the directories in the variable go first on the stub's sys.path.
STUB_PTH_LINE = f'import os, sys; p = os.environ.get("{STUB_SITE_VARIABLE}"); sys.path[:0] = p.split(os.pathsep) if p else []\n'
STUB_NUMPY = "1.26.4"
# Exact versions, so that no release can change what the stub runs: numpy 1.x, and the newest
# ml_dtypes built for it (the one tritonclient itself pins: ml-dtypes<=0.5.4).
STUB_PACKAGES = (f"numpy=={STUB_NUMPY}", "ml_dtypes==0.5.4")


def stub_site() -> Path:
    """Return where the stub's numpy 1.x lives: <venv>/triton-stub."""
    return Path(sys.prefix) / "triton-stub"


def library_path(current: str | None, libdir: str | None) -> str | None:
    """Return LD_LIBRARY_PATH with the interpreter's LIBDIR first (once), or `current` when there is none."""
    if not libdir:
        return current
    rest = [p for p in (current or "").split(os.pathsep) if p and p != libdir]
    return os.pathsep.join([libdir, *rest])


def server_environment() -> dict[str, str]:
    """Return the environment for the bundled Triton server and its stubs; raise naming the fix when it cannot work.

    The stub imports trtpipe from the same place as this process (a checkout first on its path), and
    finds its Python (prefix, site-packages) from the interpreter first on PATH."""
    import pytriton

    env = dict(os.environ)
    prepare_environment(env)
    import trtpipe

    source = str(Path(trtpipe.__file__).resolve().parents[1])
    env[STUB_SITE_VARIABLE] = os.pathsep.join(p for p in (env.get(STUB_SITE_VARIABLE), source) if p)
    libs = Path(pytriton.__file__).resolve().parents[1] / "nvidia_pytriton.libs"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (env.get("LD_LIBRARY_PATH"), str(libs)) if p)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def prepare_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Set, in `env` (default os.environ), what the Triton child needs; raise naming the fix when it cannot work."""
    env = os.environ if env is None else env
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and not any(Path(libdir).glob("libpython3*.so*")):
        libdir = None  # a static interpreter: the stub's own search is all there is
    path = library_path(env.get("LD_LIBRARY_PATH"), libdir)
    if path:
        env["LD_LIBRARY_PATH"] = path
    import numpy as np

    if int(np.__version__.split(".")[0]) < 2:
        return
    site = stub_site()
    pth = Path(sysconfig.get_paths()["purelib"]) / STUB_PTH
    if not all((site / name).is_dir() for name in ("numpy", "ml_dtypes")) or not pth.is_file():
        raise TrtpipeError(
            f"this environment has numpy {np.__version__}, and the Triton Python-backend stub of nvidia-pytriton 0.7.0 "
            f"needs numpy<2: run 'python -m trtpipe.serve.environment' once (it installs {' and '.join(STUB_PACKAGES)} for "
            f"the stub alone into {site}), or install trtpipe[serve] into an environment with numpy<2")
    if Path(sysconfig.get_paths()["purelib"], STUB_PTH).read_text() != STUB_PTH_LINE:
        raise TrtpipeError(f"{pth}: written by another trtpipe version; run 'python -m trtpipe.serve.environment' again")
    env[STUB_SITE_VARIABLE] = str(site)


def install_stub_site() -> None:
    """Install numpy 1.x (and what must match it) for the stub beside this environment, and the .pth
    that lets only the stub see it."""
    import subprocess

    site = stub_site()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(site),
                    *STUB_PACKAGES], check=True)
    pth = Path(sysconfig.get_paths()["purelib"]) / STUB_PTH
    pth.write_text(STUB_PTH_LINE)
    log.info("%s for the Triton stub in %s; %s adds it to the stub's path", ", ".join(STUB_PACKAGES), site, pth)


def check_port(port: int, flag: str, host: str = "127.0.0.1") -> None:
    """Raise a one-line error when `port` cannot be bound on `host` (taken, or privileged)."""
    if not 0 < port < 65536:
        raise TrtpipeError(f"{flag} {port}: not a port; choose one in 1-65535")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As Triton binds: a port a stopped server left in TIME_WAIT is free, one with a listener is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            why = "is taken (another server?)" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            raise TrtpipeError(f"{flag} {port}: {host}:{port} {why}; choose a free port with {flag}") from None


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port that was free on `host` a moment ago (tests and benchmarks pick theirs this way)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    configure()
    install_stub_site()
