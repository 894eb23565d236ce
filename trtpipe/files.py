"""Atomic writes, file fingerprints and the one reader of text inputs: an interrupted step never leaves
a file make takes for done, and a text input that cannot be one is refused before it is read."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from trtpipe.errors import TrtpipeError

# A spec, labels, a calibration cache, an exclusions file or a report is far smaller; a larger file
# is refused from its size, before it is read whole into memory.
MAX_TEXT_INPUT_BYTES = 16 << 20

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


def regular_file(path: str | os.PathLike, where: str, fix: str) -> os.stat_result:
    """Return the status of an input file, or raise starting with `where` (the flag and the file) and saying `fix`
    unless it is a regular file: a FIFO would wait for a writer for ever, a device could be endless, and a
    path the system refuses (a link to itself, a name too long) cannot be read either."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise TrtpipeError(f"{where}: cannot read it (no such file); {fix}") from None
    except OSError as exc:
        raise TrtpipeError(f"{where}: cannot read it ({exc.strerror}); {fix}") from None
    if stat.S_ISDIR(info.st_mode):
        raise TrtpipeError(f"{where}: is a directory; {fix}")
    if not stat.S_ISREG(info.st_mode):
        raise TrtpipeError(f"{where}: is not a regular file (a FIFO, device or socket); {fix}")
    return info


def read_text_input(path: str | os.PathLike, where: str, fix: str) -> str:
    """Return the UTF-8 text of an input file, or raise starting with `where` (the flag and the file) and saying `fix`.

    Only a regular file is opened (regular_file).
    """
    path = Path(path)
    info = regular_file(path, where, fix)
    if info.st_size > MAX_TEXT_INPUT_BYTES:
        raise TrtpipeError(f"{where}: {info.st_size} bytes, more than such a file holds "
                           f"(at most {MAX_TEXT_INPUT_BYTES >> 20} MiB); {fix}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrtpipeError(f"{where}: cannot read it ({exc.strerror}); {fix}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrtpipeError(f"{where}: not UTF-8 text (byte {exc.start}); save it as UTF-8, or {fix}") from None


def sidecar_path(path: str | os.PathLike) -> Path:
    """Return the JSON sidecar beside a file: `<file>.json` (engines, calibration caches)."""
    return Path(f"{path}.json")


def read_sidecar_json(path: str | os.PathLike, what: str, fix: str) -> dict | None:
    """Return the JSON object in the sidecar beside `path` (`<path>.json`: what a cache was calibrated for, what
    an engine was built from), None when there is none; raise naming the sidecar, as not `what`, saying `fix`,
    when it cannot be one: not a regular file (a FIFO would be waited on for ever), not UTF-8, over 16 MiB,
    not JSON, not an object, or nested deeper than the parser goes."""
    side = sidecar_path(path)
    if not os.path.lexists(side):
        return None
    text = read_text_input(side, str(side), fix)
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        raise TrtpipeError(f"{side}: not {what} ({why}); {fix}") from None
    if not isinstance(raw, dict):
        raise TrtpipeError(f"{side}: not {what} (not a JSON object); {fix}")
    return raw


# The folders ensure_dir made, outermost first: a command that fails or is interrupted takes away those it
# left empty (remove_made_folders, which the CLI calls), so that no folder is left for an output never written.
_MADE_FOLDERS: list[Path] = []


def ensure_dir(path: str | os.PathLike, flag: str = "-o") -> Path:
    """Return the directory, created if needed, or raise if it cannot be written."""
    path = Path(path)
    missing = [folder for folder in (path, *path.parents) if not os.path.lexists(folder)]
    try:
        path.mkdir(parents=True, exist_ok=True)
        _MADE_FOLDERS.extend(reversed(missing))
    except OSError as exc:
        raise TrtpipeError(f"{flag} {path}: cannot create the directory ({exc.strerror}); choose a writable path") from None
    if not os.access(path, os.W_OK):
        raise TrtpipeError(f"{flag} {path}: the directory is not writable; choose a writable path")
    return path


def remove_made_folders() -> None:
    """Remove the folders ensure_dir made that are still empty, deepest first; forget the others."""
    while _MADE_FOLDERS:
        with contextlib.suppress(OSError):
            _MADE_FOLDERS.pop().rmdir()


def forget_made_folders() -> None:
    """Forget the folders made so far: what a command makes from now on is its own (the CLI calls this first)."""
    _MADE_FOLDERS.clear()


def check_output_dir(path: str | os.PathLike, flag: str = "-o", what: str = "its results") -> Path:
    """Return `path` if a folder of outputs may be made or written there, else raise naming the flag: an existing
    file, a link to itself, a name too long, or a path through a file (before any work, not at the first write)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        _check_parents(path, flag)
        return path
    except OSError as exc:
        raise TrtpipeError(f"{flag} {path}: cannot use it ({exc.strerror}); choose another folder") from None
    if not stat.S_ISDIR(mode):
        raise TrtpipeError(f"{flag} {path}: is a file; name a folder to write {what} into")
    return path


def _check_parents(path: Path, flag: str) -> None:
    """Raise naming `flag` when a folder `path` would be made in is a file (or cannot be looked at)."""
    for parent in path.parents:
        try:
            mode = os.stat(parent).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise TrtpipeError(f"{flag} {path}: cannot use {parent} ({exc.strerror}); choose another path") from None
        if not stat.S_ISDIR(mode):
            raise TrtpipeError(f"{flag} {path}: {parent} is a file, not a folder; choose a writable path")
        return


def check_output(path: str | os.PathLike, inputs=(), flag: str = "-o", siblings=()) -> Path:
    """Return `path` if a regular file may be written there, else raise naming the flag and the fix.

    Refused: a directory, a FIFO, a device or socket (replacing one would break what reads it, or a
    write would block), any of `inputs` (writing over the model being read destroys it), and a path
    inside an input directory (a file written into the data joins the samples the next run reads). Every
    command that writes calls this before it reads anything, with all it reads as `inputs` (model,
    spec, data, cache, exclusions) and the other files it writes beside `path` as `siblings` (a
    tuned cache's .toml, a sidecar), which are held to the same rules. A path under one of `inputs` that is
    not a folder (a report folder where the command writes its cache) is refused too.
    """
    path = _check_writable(path, flag)
    for written in (path, *(_check_writable(sibling, flag) for sibling in siblings)):
        for source in inputs:
            if source is not None and same_file(written, source):
                also = "is also" if written == path else f"would also write {written}, which is"
                raise TrtpipeError(f"{flag} {path}: {also} an input ({source}); write the result to another file")
            if source is not None and _inside(written, source):
                what = "is" if written == path else f"would also write {written},"
                raise TrtpipeError(f"{flag} {path}: {what} inside the input directory {source} (the next run would "
                                   "read it as data); write the result outside it")
            if source is not None and _under_a_file(written, source):
                what = "is" if written == path else f"would also write {written},"
                raise TrtpipeError(f"{flag} {path}: {what} inside {source}, which is a file this command reads or "
                                   "writes, not a folder; write the result elsewhere")
    return path


def _under_a_file(path: Path, source: str | os.PathLike) -> bool:
    """Return True if `path` would be written under `source`, a path that is no folder (a file, or one not made yet)."""
    return not os.path.isdir(source) and Path(os.path.abspath(source)) in Path(os.path.abspath(path)).parents


def _inside(path: Path, directory: str | os.PathLike) -> bool:
    """Return True if `path` would be written inside the existing directory `directory`, however either is spelt."""
    if not os.path.isdir(directory):
        return False
    here, there = os.path.realpath(path.parent if str(path.parent) else "."), os.path.realpath(directory)
    return here == there or here.startswith(there.rstrip(os.sep) + os.sep)


def _check_writable(path: str | os.PathLike, flag: str) -> Path:
    path = Path(path)
    if str(path) in ("", "."):
        raise TrtpipeError(f"{flag}: name an output file")
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # not there yet: its folders must be folders, or be made
        _check_parents(path, flag)
    except OSError as exc:
        raise TrtpipeError(f"{flag} {path}: cannot use it ({exc.strerror}); choose another path") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise TrtpipeError(f"{flag} {path}: is a directory; name a file inside it, e.g. {path / 'out'}")
    if mode is not None and not stat.S_ISREG(mode):
        raise TrtpipeError(f"{flag} {path}: is not a regular file (a FIFO, device or socket); choose a file path")
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Return True if `a` and `b` name one file (the same path, or links to one inode)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


class Outputs:
    """The files one command writes, each staged as a temporary beside it and renamed into place together.

    A command that fails or is interrupted before the commit leaves none of them, finished or not, and
    every file it would have replaced untouched. The renames themselves run with Ctrl-C held back, so
    an interrupt never splits one result (an engine and its sidecar) in two.
    """

    def __init__(self):
        self._staged: list[tuple[Path, Path, bool]] = []  # (temporary, final path, renamed last)

    def stage(self, path: str | os.PathLike, flag: str = "-o", last: bool = False) -> Path:
        """Return a new temporary for `path`; `last`: rename it after the others (what marks the set finished)."""
        path = check_output(path, (), flag)
        ensure_dir(path.parent if str(path.parent) else ".", flag)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a finished file gets the usual mode
        self._staged.append((Path(tmp), path, last))
        return Path(tmp)

    def write(self, path: str | os.PathLike, data: bytes | str, flag: str = "-o", last: bool = False) -> Path:
        """Stage `data` (str: as UTF-8) for `path`; return the temporary it is in until the commit."""
        tmp = self.stage(path, flag, last)
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        return tmp

    def commit(self) -> None:
        with _interrupts_held():
            for tmp, path, _ in sorted(self._staged, key=lambda item: item[2]):
                os.replace(tmp, path)
            self._staged.clear()

    def discard(self) -> None:
        for tmp, _, _ in self._staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self._staged.clear()


@contextlib.contextmanager
def staged_outputs(into: Outputs | None = None) -> Iterator[Outputs]:
    """Yield an Outputs; commit every staged file if the block succeeds, else remove them all.

    `into`: a caller's Outputs, yielded as it is: the caller commits it with its other files.
    """
    if into is not None:
        yield into
        return
    outputs = Outputs()
    try:
        yield outputs
        outputs.commit()
    finally:
        outputs.discard()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, flag: str = "-o") -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds.

    Two processes writing one output each write their own temporary file; the last rename wins
    and the file is always one whole result, never a mix.
    """
    with staged_outputs() as outputs:
        yield outputs.stage(path, flag)


# What stops a command besides Ctrl-C: `kill`, `timeout` and schedulers send SIGTERM, a closed terminal SIGHUP.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C, raised where the command stands (stops_as_interrupts): it unwinds as
    Ctrl-C does, every staged file removed, and the command exits with 128 + the signal's number."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.number = number


@contextlib.contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into Stopped for the block (their default action ends the process at once, and
    leaves every temporary staged so far): not a signal ignored (nohup), nor outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number, frame):
        raise Stopped(number)

    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS
                if signal.getsignal(number) not in (signal.SIG_IGN, None)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back until the block ends (signal handlers can only be set in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {number: signal.signal(number, lambda *args: caught.append(args))
                for number in (signal.SIGINT, *STOP_SIGNALS) if signal.getsignal(number) not in (signal.SIG_IGN, None)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if caught:
            number = caught[0][0]
            handler = previous[number]
            if callable(handler):
                handler(*caught[0])  # Python's handlers raise (KeyboardInterrupt, Stopped), now that all is in place
            else:
                signal.raise_signal(number)  # SIG_DFL: let the signal end the process as it would have


def write_bytes(path: str | os.PathLike, data: bytes, flag: str = "-o") -> None:
    with staged_outputs() as outputs:
        outputs.write(path, data, flag)


def write_text(path: str | os.PathLike, text: str, flag: str = "-o") -> None:
    write_bytes(path, text.encode(), flag)


def json_text(obj) -> str:
    """Return `obj` as the JSON text every trtpipe file holds (indented, newline-terminated)."""
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"


def write_json(path: str | os.PathLike, obj, flag: str = "-o") -> None:
    write_text(path, json_text(obj), flag)
