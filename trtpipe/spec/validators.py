"""The checks a model.toml's values go through: each returns the value or raises Invalid saying where and what was meant.

Each check carries a `kind` (and a table its `keys`) that scripts/spec_docs.py prints on the reference page.
"""

from __future__ import annotations

import difflib
import math

from trtpipe.spec.model import NO_BLANK


class Invalid(Exception):
    """A spec value is wrong; the message says where and what was meant."""


def did_you_mean(word: str, known, wrap=lambda k: k) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {wrap(close[0])}?" if close else f"; known: {', '.join(wrap(k) for k in known)}"


def _describe(value) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if isinstance(value, (str, int, float, bool)) else kind


def string(value, where):
    if not isinstance(value, str):
        raise Invalid(f"{where} must be a string, not {_describe(value)}")
    return value


string.kind = "string"


def path(value, where):
    """A string that can name a file: no NUL, which no file system's names hold (os.stat raises on one)."""
    value = string(value, where)
    if "\0" in value:
        raise Invalid(f"{where} holds a NUL character ({value!r}), which no file name can; fix the path")
    return value


path.kind = "string"


def integer(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{where} must be an integer, not {_describe(value)}")
    return value


integer.kind = "integer"


def number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{where} must be a number, not {_describe(value)}")
    if not math.isfinite(value):
        raise Invalid(f"{where} must be a finite number, not {value}")
    return float(value)


number.kind = "number"


def boolean(value, where):
    if not isinstance(value, bool):
        raise Invalid(f"{where} must be true or false, not {_describe(value)}")
    return value


boolean.kind = "boolean"


def integer_or_none(none_is, what: str, none_means: str):
    """Return the check of an integer or "none", which it gives back as `none_is`; its error says `what`
    the integer is and what "none" means."""

    def check(value, where):
        if value == "none":
            return none_is
        if isinstance(value, str):
            raise Invalid(f"{where} is {value!r}; write {what} or \"none\" {none_means}")
        return integer(value, where)

    check.kind = 'integer or "none"'
    return check


axis_or_none = integer_or_none(None, "an axis (an integer)", "for an output without a batch axis")
class_or_none = integer_or_none(NO_BLANK, "a class index (an integer)", "for a tagger with no padding class")


def choice(*choices):
    def check(value, where):
        if string(value, where) not in choices:
            raise Invalid(f"{where} is {value!r}, not one of {', '.join(choices)}{did_you_mean(value, choices)}")
        return value
    check.kind = "one of " + ", ".join(f'"{c}"' for c in choices)
    return check


def list_of(item, length: int | None = None):
    def check(value, where):
        if isinstance(value, str):
            raise Invalid(f"{where} must be a list, not a string; write {where.split()[-1]} = [{value!r}]")
        if not isinstance(value, list):
            raise Invalid(f"{where} must be a list, not {_describe(value)}")
        if length is not None and len(value) != length:
            raise Invalid(f"{where} must have {length} entries, not {len(value)}")
        return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]
    check.kind = f"list of {length} {item.kind}s" if length else f"list of {item.kind}s"
    return check


def table(keys: dict, name: str, required=(), extra=None):
    """A TOML table with the given keys; `extra` checks keys beyond them (None: none allowed)."""
    def check(value, where):
        if not isinstance(value, dict):
            raise Invalid(f"{where} must be a table ([{name}]), not {_describe(value)}")
        for key in required:
            if key not in value:
                raise Invalid(f"{where} needs a key '{key}'")
        out = {}
        for key, v in value.items():
            if key in keys:
                out[key] = keys[key](v, f"{where} {key}")
            elif extra is not None:
                out[key] = extra(v, f"{where} {key}")
            else:
                raise Invalid(f"unknown key '{key}' in {where}{did_you_mean(key, keys, repr)}")
        return out
    check.kind, check.keys, check.required = "table", keys, required
    return check


def map_of(item, name: str, keys=None):
    """A table whose keys are free (input names, precisions) and whose values all have one type."""
    def check(value, where):
        if not isinstance(value, dict):
            raise Invalid(f"{where} must be a table ([{name}]), not {_describe(value)}")
        for key in value:
            if keys is not None and key not in keys:
                raise Invalid(f"{where}: '{key}' is not one of {', '.join(keys)}{did_you_mean(key, keys, repr)}")
        return {k: item(v, f"{where} {k}" if keys is None else f"[{name}.{k}]") for k, v in value.items()}
    check.kind = "table of tables" if hasattr(item, "item") else f"table of {item.kind}s"
    check.item, check.names = item, keys
    return check


def array_of_tables(table, name: str):
    def check(value, where):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise Invalid(f"{where} must be an array of tables ([[{name}]] entries), not {_describe(value)}")
        return [table(v, f"[[{name}]] #{i + 1}") for i, v in enumerate(value)]
    check.kind, check.keys, check.required = "array of tables", table.keys, table.required
    return check


def free_table(value, where):
    if not isinstance(value, dict):
        raise Invalid(f"{where} must be a table, not {_describe(value)}")
    return value


free_table.kind = "table (any keys)"
