"""Write docs/model-toml.md from the schema `load_spec` validates against (trtpipe.spec.schema.SCHEMA).

    python scripts/spec_docs.py            # rewrite the page
    python scripts/spec_docs.py --check    # exit 1 when it is out of date (make test runs it)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "model-toml.md"
EXAMPLE = ROOT / "models" / "digits" / "model.toml"


def page() -> str:
    from trtpipe.spec.schema import KEY_DOCS, SCHEMA, TABLES

    lines = ["# model.toml", "",
             "A model's spec: its inputs, how data becomes them, where the data is, how outputs are judged and",
             "what quantization leaves out. `trtpipe init MODEL.onnx` writes a starting one. Every command that",
             "takes `--spec` checks it against this schema when it loads: an unknown table or key, a wrong type,",
             "or a string where a list belongs is a one-line error that says what was meant.", "",
             "## Top-level keys", "", "| key | type | default | what it is |", "|---|---|---|---|"]
    for key, check in SCHEMA.items():
        if key not in TABLES:
            default, text = KEY_DOCS[key]
            lines.append(f"| `{key}` | {check.kind} | {default or '-'} | {text} |")
    for key, check in SCHEMA.items():
        if key not in TABLES:
            continue
        default, text = KEY_DOCS[key]
        header = f"[[{key}]]" if check.kind == "array of tables" else f"[{key}]"
        lines += ["", f"## `{header}`", "", f"{text[0].upper()}{text[1:]}.", ""]
        keys = getattr(check, "keys", None)
        if isinstance(keys, dict):
            required = set(getattr(check, "required", ()))
            lines += ["| key | type | default | what it is |", "|---|---|---|---|"]
            for name, item in keys.items():
                item_default, item_text = KEY_DOCS[f"{key}.{name}"]
                default_text = "required" if name in required else (item_default or "-")
                lines.append(f"| `{name}` | {item.kind} | {default_text} | {item_text} |")
        else:
            lines.append(f"Type: {check.kind}." + (f" Default: {default}." if default else ""))
    lines += ["", "## Example", "", f"The shipped digits model's spec ({EXAMPLE.relative_to(ROOT)}):", "",
              "```toml", EXAMPLE.read_text().rstrip(), "```", "",
              "Generated from trtpipe.spec.schema.SCHEMA by scripts/spec_docs.py."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the schema")
    args = parser.parse_args()
    text = page()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/spec_docs.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
