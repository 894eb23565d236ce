"""TOML read (tomllib, or tomli before Python 3.11) and written (toml_string) for specs and the files tune writes."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["loads", "toml_string", "tomllib"]


def loads(text: str) -> dict:
    """Return the TOML in `text` (tomllib.loads); arrays or inline tables nested past Python's recursion limit
    raise tomllib.TOMLDecodeError too, as any other text that is no TOML does, not RecursionError."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or inline tables nested too deeply") from None


def toml_string(text: str) -> str:
    """Return `text` as a TOML basic string, quotes included: valid for any text, as a value or a key."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    # TOML refuses unescaped control characters and DEL; \uXXXX covers them all.
    return '"' + "".join(escapes.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in text) + '"'
