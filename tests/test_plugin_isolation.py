"""A plugin whose package fails to import (spec entry point or code entry point)
does not break ``import zoo``, ``zoo list``, other specs or the resolver; ``zoo doctor`` and
``zoo list --broken`` name it with a one-line error."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.errors import ResolveError
from registry.resolve import resolve

FIXTURES = Path(__file__).parent / "fixtures"


def broken_site(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    (site / "badplug").mkdir(parents=True)
    (site / "badplug" / "__init__.py").write_text("raise RuntimeError('badplug is broken\\non two lines')\n")
    (site / "badplug" / "specs").mkdir()  # its spec folder: located without importing badplug
    (site / "badplug" / "specs" / "__init__.py").write_text("")
    dist = site / "badplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: badplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[zoo.specs]\nbad = badplug.specs\nghost = not_installed_pkg_zz\n\n[zoo.plugins]\nbad = badplug\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(FIXTURES)])}
    env.pop("ZOO_ALLOWED_PACKAGES", None)
    return env


def zoo_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env)


def test_broken_plugin_is_isolated(tmp_path: Path) -> None:
    env = broken_site(tmp_path)
    res = subprocess.run([sys.executable, "-c", "import zoo; print(len(zoo.list()))"], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and int(res.stdout) >= 9, res.stderr  # the built-ins are all there
    res = zoo_cli(env, "list")  # listing never imports a plugin; an entry point naming nothing is one line
    assert res.returncode == 0 and "ddim" in res.stdout
    assert not [line for line in res.stderr.splitlines() if "badplug.specs" in line]
    ghost = [line for line in res.stderr.splitlines() if "not_installed_pkg_zz" in line]
    assert len(ghost) == 1 and ghost[0].startswith("BROKEN") and "no package folder" in ghost[0]
    res = zoo_cli(env, "show", "ddim", "--no-detect")
    assert res.returncode == 0, res.stderr
    res = zoo_cli(env, "list", "--broken")
    assert res.returncode == 1
    assert "BROKEN plugin bad (badplug): RuntimeError: badplug is broken on two lines" in res.stderr
    res = zoo_cli(env, "doctor")
    assert res.returncode == 1 and "BROKEN plugin bad (badplug)" in res.stdout and "ddim" in res.stdout


def test_resolving_into_a_package_that_raises_on_import_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crashy_pkg_zz").mkdir()
    (tmp_path / "crashy_pkg_zz" / "__init__.py").write_text("raise ValueError('boom\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "crashy_pkg_zz")
    with pytest.raises(ResolveError) as exc:
        resolve("crashy_pkg_zz:thing", kind="factory")
    assert "ValueError: boom second line" in str(exc.value) and "\n" not in str(exc.value)
