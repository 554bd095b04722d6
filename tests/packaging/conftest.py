"""The wheel built from this checkout and installed into a fresh venv outside it, once per
test process (docs/reference/testing.md, "The package")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).parents[2]


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    home: Path
    """A working directory outside the checkout."""

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RR_", "PYTHON"))}
        env["HOME"] = str(self.home)
        env["COLUMNS"] = "100"
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=self.home,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )


def pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)}: {done.stderr}"


NOT_THE_PACKAGE = (".git", ".venv", "build", "dist", "*.egg-info", "node_modules", "__pycache__")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout. The tests that use it are in the xdist group "packaging",
    so that one worker builds it once (pyproject.toml: --dist loadgroup)."""
    root = tmp_path_factory.mktemp("wheel")
    # built from a copy of the sources: setuptools writes build/ beside them, and a build in
    # the checkout would race another one (a developer's pip install -e, a second worker)
    source = root / "source"
    shutil.copytree(CHECKOUT, source, ignore=shutil.ignore_patterns(*NOT_THE_PACKAGE))
    dist = root / "dist"
    pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(dist), str(source))
    (built,) = dist.glob("rabbitctl_retry-*.whl")
    return built


def fresh_venv(root: Path, *requirements: str) -> Path:
    """A new venv in ``root / "venv"`` with ``requirements`` installed; its directory."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    if requirements:
        pip(venv / "bin" / "python", "install", *requirements)
    return venv


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """``pip install`` of the wheel alone, in a fresh venv."""
    root = tmp_path_factory.mktemp("plain")
    venv = fresh_venv(root, str(wheel))
    home = root / "home"
    home.mkdir()
    return Installed(wheel=wheel, venv=venv, home=home)
