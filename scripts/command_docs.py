"""Write docs/commands/<command>.md from the CLI itself: summary, options and the help's examples.

    python scripts/command_docs.py            # rewrite the pages
    python scripts/command_docs.py --check    # exit 1 when a page is out of date (make test runs it)

The examples are the `Examples:` lines of each command's help; the docs tests run them in a
workspace with a small model, so a help text cannot show a command line that does not work.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "commands"

# Examples the docs tests cannot run here, and why (the marker the docs tests read).
NOT_RUN_HERE = {
    "serve": "skip it serves until stopped; tests/serve starts real servers",
    "loadtest": "skip it needs a running server; tests/serve runs it against one",
}


def examples(command: click.Command) -> list[str]:
    """Return the command lines under `Examples:` in the command's help."""
    lines = (command.help or "").splitlines()
    found, inside = [], False
    for line in lines:
        if line.strip() == "Examples:":
            inside = True
        elif inside and line.strip().startswith("trtpipe "):
            found.append(line.strip())
        elif inside and line.strip() and not line.startswith(" "):
            inside = False
    return found


def option_rows(command: click.Command) -> list[str]:
    rows = []
    for param in command.params:
        if isinstance(param, click.Argument):
            rows.append(f"| `{param.human_readable_name}` | argument{' (repeatable)' if param.nargs == -1 else ''} | | |")
            continue
        if not isinstance(param, click.Option) or param.hidden:
            continue
        names = ", ".join(f"`{n}`" for n in param.opts + param.secondary_opts)
        kind = "flag" if param.is_flag else _type_text(param.type)
        default = "" if not param.show_default or param.is_flag else f"`{_default_text(param.default)}`"
        rows.append(f"| {names} | {kind}{', repeatable' if param.multiple else ''} | {default} | {param.help or ''} |")
    return rows


def _type_text(kind: click.ParamType) -> str:
    if isinstance(kind, click.Choice):
        return " \\| ".join(f"`{c}`" for c in kind.choices)
    if isinstance(kind, click.types._NumberRangeBase):  # the range the value is checked against, e.g. x>=1
        number = "integer" if isinstance(kind, click.IntRange) else "finite number"
        return f"{number}, `{kind._describe_range()}`"
    return kind.name.lower()


def _default_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def page(name: str, command: click.Command) -> str:
    summary = (command.help or "").strip().splitlines()[0]
    body = [f"# trtpipe {name}", "", summary, "",
            "```", command.get_usage(click.Context(command, info_name=f"trtpipe {name}")).strip(), "```", ""]
    text = inspect.cleandoc(command.help or "").split("\n", 1)[-1] if "\n" in (command.help or "") else ""
    text = text.split("Examples:")[0].replace("\b", "").strip()
    if text:
        body += [text, ""]
    body += ["| option | takes | default | what it does |", "|---|---|---|---|", *option_rows(command), ""]
    shown = examples(command)
    if shown:
        body += ["## Examples", ""]
        if name in NOT_RUN_HERE:
            body.append(f"<!-- docs-test: {NOT_RUN_HERE[name]} -->")
        body += ["```console", *[f"$ {line}" for line in shown], "```", ""]
    body.append("Generated from `trtpipe " + name + " --help` by scripts/command_docs.py; the examples are run by the tests.")
    return "\n".join(body) + "\n"


def pages() -> dict[Path, str]:
    from trtpipe.cli import main

    result = {PAGES / f"{name}.md": page(name, command) for name, command in sorted(main.commands.items())}
    index = ["# Commands", "", "| command | what it does |", "|---|---|"]
    index += [f"| [`{name}`]({name}.md) | {(c.help or '').strip().splitlines()[0]} |" for name, c in sorted(main.commands.items())]
    result[PAGES / "README.md"] = "\n".join(index) + "\n"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from what the CLI says")
    args = parser.parse_args()
    wanted = pages()
    stale = [p for p, text in wanted.items() if not p.is_file() or p.read_text() != text]
    extra = [p for p in PAGES.glob("*.md") if p not in wanted]
    if args.check:
        for path in stale + extra:
            print(f"{path.relative_to(ROOT)} is out of date: run python scripts/command_docs.py", file=sys.stderr)
        return 1 if stale or extra else 0
    PAGES.mkdir(parents=True, exist_ok=True)
    for path in extra:
        path.unlink()
    for path in stale:
        path.write_text(wanted[path])
    print(f"wrote {len(stale)} of {len(wanted)} pages in {PAGES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
