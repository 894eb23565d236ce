"""Atomic writes and file fingerprints: an interrupted step never leaves a file make takes for done."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, flag: str = "-o") -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds."""
    path = Path(path)
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
