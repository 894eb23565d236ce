"""The one error type users see: a single line that names the file or flag and the fix."""


class TrtpipeError(Exception):
    """Bad input or an unmet requirement; the CLI prints it as one line and exits with code 2."""


class NothingToQuantize(TrtpipeError):
    """No layer of the model takes the format asked for: INT8/FP8 with no Conv, MatMul or Gemm to calibrate, INT4/FP4
    with no weight that splits into blocks. `build --precision auto` and deploy skip that precision and go on."""


class MissingDependency(TrtpipeError):
    """An optional package is not installed."""

    def __init__(self, module: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the Python package '{module}': pip install 'trtpipe[{extra}]'"
        )


def require(module: str, extra: str, purpose: str):
    """Return the imported module, or raise MissingDependency naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and not module.startswith(exc.name):
            raise  # the module exists but one of its own imports is broken: show that
        raise MissingDependency(module, extra, purpose) from None


def first_line(exc: BaseException | str) -> str:
    """Return the first non-blank line of an error's text, "" when it has none (a bare KeyError())."""
    return next((part.strip() for part in str(exc).splitlines() if part.strip()), "")
