"""An optional extra that is not installed means SKIP, never FAIL. With xgboost hidden
(its distribution reported missing and ``import xgboost`` failing), `zoo check forestflow` gave 2 passed /
12 failed with bare ModuleNotFoundErrors and `zoo doctor` still said "runs here". Now: every check that
needs it is SKIP with the pip command, `zoo run` refuses in one line naming the extra, and `zoo doctor`
says what is needed. The extra's name comes from the installed package metadata (pyproject.toml)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIP = 'pip install "zoo-icml2026[trees]"'

#: Run the CLI with xgboost hidden: its distribution is "not installed" and importing it fails.
HIDDEN = """
import importlib.abc, sys

class HideXGBoost(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "xgboost" or name.startswith("xgboost."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None

sys.meta_path.insert(0, HideXGBoost())
import registry.requirements as rq
_real = rq.installed_version
rq.installed_version = lambda package: None if package == "xgboost-cpu" else _real(package)
from zoo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _zoo(tmp_path: Path, *args: str, hidden: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ZOO_CACHE_DIR": str(tmp_path / "cache"), "ZOO_METRICS_DIR": str(tmp_path / "metrics")}
    cmd = [sys.executable, "-c", HIDDEN, *args] if hidden else [sys.executable, "-m", "zoo.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


def test_a_missing_extra_skips_checks_refuses_run_and_shows_in_doctor(tmp_path: Path) -> None:
    res = _zoo(tmp_path, "check", "forestflow")
    out = res.stdout
    assert res.returncode == 0 and "Traceback" not in res.stderr, out + res.stderr[-2000:]
    lines = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert lines and not [ln for ln in lines if "] FAIL" in ln], out
    assert [ln for ln in lines if "] PASS  forestflow::validates " in ln], out
    skips = [ln for ln in lines if "] SKIP" in ln]
    assert len(skips) == len(lines) - 1, out  # everything but validates
    assert all("needs xgboost-cpu>=3.2 (extra trees), not installed" in ln and PIP in ln for ln in skips), skips

    res = _zoo(tmp_path, "run", "forestflow")
    err = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(err) == 1, res.stderr
    assert "requires.xgboost-cpu" in err[0] and "(extra trees)" in err[0] and PIP in err[0], err

    res = _zoo(tmp_path, "doctor")
    for name in ("forestflow", "treeflow", "dsmtree"):
        line = next(ln for ln in res.stdout.splitlines() if ln.split()[:1] == [name])
        assert "needs: xgboost-cpu (extra trees)" in line and "runs here" not in line, line


def test_doctor_says_runs_here_when_the_extra_is_installed(tmp_path: Path) -> None:
    """Negative control: the same commands with xgboost present."""
    pytest.importorskip("xgboost")
    res = _zoo(tmp_path, "doctor", hidden=False)
    line = next(ln for ln in res.stdout.splitlines() if ln.split()[:1] == ["forestflow"])
    assert "runs here: toy" in line and "needs:" not in line, line


def test_extras_come_from_the_package_metadata() -> None:
    """Every package of pyproject.toml's optional-dependencies maps to its extra, as installed."""
    import tomllib

    from registry.requirements import extras_of

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = extras_of("zoo-icml2026")
    for extra, reqs in declared.items():
        for req in reqs:
            assert extra in installed.get(canonicalize_name(Requirement(req).name), ()), (extra, req, installed)
    assert "torch" not in installed  # a core dependency belongs to no extra


def test_a_requirement_outside_any_extra_names_the_package(tmp_path: Path) -> None:
    from registry.loader import load_spec_file
    from registry.requirements import unmet

    spec_file = tmp_path / "s.yaml"
    demo = (ROOT / "tests" / "fixtures" / "specs" / "demo-gaussian.yaml").read_text()
    (tmp_path / "demo-affine.safetensors").write_bytes((ROOT / "tests" / "fixtures" / "specs" / "demo-affine.safetensors").read_bytes())
    spec_file.write_text(demo.replace("tags: [demo]", 'tags: [demo]\nrequires: {not-a-real-package-zoo: ">=2"}'))
    (u,) = unmet(load_spec_file(spec_file))
    assert u.needs == "not-a-real-package-zoo>=2" and u.pip == 'pip install "not-a-real-package-zoo>=2"'
