"""Atomic writes and file fingerprints: an interrupted step never leaves a file make takes for done."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from trtpipe.errors import TrtpipeError

# Read once: os.umask can only be read by setting it, which races with other threads.
_UMASK = os.umask(0)
os.umask(_UMASK)


def sha256(path: str | os.PathLike) -> str:
    """Return the hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sidecar_path(path: str | os.PathLike) -> Path:
    """Return the JSON sidecar beside a file: `<file>.json` (engines, calibration caches)."""
    return Path(f"{path}.json")


def ensure_dir(path: str | os.PathLike, flag: str = "-o") -> Path:
    """Return the directory, created if needed, or raise if it cannot be written."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrtpipeError(f"{flag} {path}: cannot create the directory ({exc.strerror}); choose a writable path") from None
    if not os.access(path, os.W_OK):
        raise TrtpipeError(f"{flag} {path}: the directory is not writable; choose a writable path")
    return path


def check_output(path: str | os.PathLike, inputs=(), flag: str = "-o") -> Path:
    """Return `path` if a regular file may be written there, else raise naming the flag and the fix.

    Refused: a directory, a FIFO, a device or socket (replacing one would break what reads it, or a
    write would block), and any of `inputs` (writing over the model being read destroys it).
    """
    path = Path(path)
    if str(path) in ("", "."):
        raise TrtpipeError(f"{flag}: name an output file")
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # not there yet; ensure_dir says what is wrong with its directory
    except OSError as exc:
        raise TrtpipeError(f"{flag} {path}: cannot use it ({exc.strerror}); choose another path") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise TrtpipeError(f"{flag} {path}: is a directory; name a file inside it, e.g. {path / 'out'}")
    if mode is not None and not stat.S_ISREG(mode):
        raise TrtpipeError(f"{flag} {path}: is not a regular file (a FIFO, device or socket); choose a file path")
    for source in inputs:
        if source is not None and same_file(path, source):
            raise TrtpipeError(f"{flag} {path}: is also an input ({source}); write the result to another file")
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Return True if `a` and `b` name one file (the same path, or links to one inode)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, flag: str = "-o") -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds.

    Two processes writing one output each write their own temporary file; the last rename wins
    and the file is always one whole result, never a mix.
    """
    path = check_output(path, (), flag)
    ensure_dir(path.parent if str(path.parent) else ".", flag)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a finished file gets the usual mode
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes(path: str | os.PathLike, data: bytes, flag: str = "-o") -> None:
    with atomic_path(path, flag) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str, flag: str = "-o") -> None:
    write_bytes(path, text.encode(), flag)


def write_json(path: str | os.PathLike, obj, flag: str = "-o") -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n", flag)
