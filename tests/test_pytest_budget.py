"""The per-spec conformance budget in pytest (registry/pytest_plugin.py), also under xdist."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_spec_over_the_budget_fails_the_pytest_run_also_under_xdist(tmp_path: Path) -> None:
    """The per-spec budget is summed from the workers' reports by the controller: a zero budget
    fails the session (exit 1, a FAILED zoo budget line), a generous one passes."""
    import os
    import subprocess
    import sys

    spec = ROOT / "tests" / "fixtures" / "specs" / "demo-gaussian.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "fixtures"), "ZOO_ALLOWED_PACKAGES": "zoo_demo_plugin"}
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zoo", str(spec), "-n", "2",
            "-k", "validates or requires or builds or seeded"]
    res = subprocess.run([*base, "--zoo-budget", "0"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 1, res.stdout[-2000:]
    assert "FAILED zoo budget: demo-gaussian" in res.stdout and " passed" in res.stdout and "failed" not in res.stdout.split("FAILED zoo budget")[0]
    res = subprocess.run([*base, "--zoo-budget", "1000"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:]
    assert "zoo conformance CPU per spec (default checks): demo-gaussian" in res.stdout
