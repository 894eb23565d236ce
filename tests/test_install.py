"""What a fresh clone installs is fixed: every pip call of the Makefile takes the lock's exact versions."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()


def recipe_lines(target_prefix: str = "") -> list[tuple[str, str]]:
    """Return (target, line) for every recipe line of the Makefile, continuation lines joined."""
    lines, target = [], None
    for line in MAKEFILE.replace("\\\n", " ").splitlines():
        if line.startswith("\t"):
            lines.append((target, line.strip()))
        elif re.match(r"^[^\s#=]+:", line) and ":=" not in line:
            target = line.split(":")[0]
    return lines


def locked(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_pip_install_takes_a_lock():
    installs = [(t, line) for t, line in recipe_lines() if "pip install" in line or "$(PIP) install" in line]
    assert len(installs) >= 5
    for target, line in installs:
        if target in ("lock", "lock-peers"):
            continue  # they resolve anew, to write the locks
        assert line.startswith(("$(PIP) ", "PIP_CONSTRAINT=")), f"{target}: '{line}' installs without a lock"


def test_the_locks_pin_every_package_exactly():
    for name in ("constraints.txt", "constraints-peers.txt"):
        pins = locked(ROOT / name)
        assert {"numpy", "pip", "setuptools"} <= set(pins), name
        assert all(re.fullmatch(r"[\w.+]+", v) for v in pins.values()), name


def test_the_lock_covers_what_make_test_and_make_demo_install():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"]]
    for extra in ("pipeline", "rtx", "test", "serve-deps", "export"):
        wanted += extras[extra]
    pins = locked(ROOT / "constraints.txt")
    for requirement in wanted:
        name = re.sub(r"[-_.]+", "-", re.split(r"[<>=!;\[ ]", requirement)[0]).lower()
        if "python_version<" in requirement or name == "trtpipe":
            continue  # tomli: only below Python 3.11; trtpipe[pipeline]: an extra's own extras, listed too
        assert name in pins, f"{requirement} is not in constraints.txt: run 'make lock'"
