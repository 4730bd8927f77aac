"""CLI happy paths and the pytest plugin, on the demo plugin spec (a third-party spec)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
SPEC = str(FIXTURES / "demo-gaussian.yaml")


def test_list_show_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--specs", str(FIXTURES), "list", "demo-*"]) == 0
    assert "demo-gaussian" in capsys.readouterr().out
    assert main(["--specs", str(FIXTURES), "list", "--json", "demo-*"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "demo-gaussian"
    assert main(["show", SPEC]) == 0
    out = capsys.readouterr().out
    assert "does not fit: needs cuda with ≥40 GB" in out
    assert re.search(r"^    toy +cpu +\[float32\] +fits$", out, re.M), out  # aligned columns
    assert re.search(r"reproduced +toy", out)
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "Zoo method spec"


def test_check_runs_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", SPEC]) == 0
    out = capsys.readouterr().out
    assert "11 passed, 0 failed, 0 skipped" in out  # incl. samplers[gaussian]::bounded-inputs
    assert "PASS  demo-gaussian::loading-path[model.full]" in out


def test_check_fails_on_unregistered_invariant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    spec = tmp_path / "s.yaml"
    spec.write_text((FIXTURES / "demo-gaussian.yaml").read_text().replace(
        "invariants: [temperature-scales-spread]", "invariants: [temperature-scales-spread, not-there]"))
    assert main(["check", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  demo-gaussian::invariant[not-there]" in out and "not registered" in out


def test_check_fails_on_wrong_reproduced_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    spec = tmp_path / "s.yaml"
    spec.write_text((FIXTURES / "demo-gaussian.yaml").read_text().replace("value: 0.7979", "value: 0.9"))
    assert main(["check", str(spec), "--only", "metric"]) == 1
    assert "measured 0.7" in capsys.readouterr().out


def test_doctor(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--specs", str(FIXTURES), "doctor"])
    out = capsys.readouterr().out
    assert re.search(r"^devices +cpu", out, re.M) and re.search(r"^offline +yes", out, re.M), out
    assert "demo-gaussian" in out and "runs here: toy" in out
    assert code == 0, out


def test_pytest_plugin_collects_a_spec_file(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(FIXTURES.parent), "ZOO_ALLOWED_PACKAGES": "zoo_demo_plugin"}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zoo", SPEC, "--rootdir", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:]
    assert "11 passed" in res.stdout


def test_python_api_third_party_spec(tmp_path: Path) -> None:
    import zoo

    (tmp_path / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    (tmp_path / "mine.yaml").write_text((FIXTURES / "demo-gaussian.yaml").read_text()
                                        .replace("name: demo-gaussian", "name: my-hot-gaussian")
                                        .replace("params: {temperature: 1.0}", "params: {temperature: 3.0}"))
    assert zoo.add_specs(tmp_path) == ["my-hot-gaussian"]
    assert "my-hot-gaussian" in zoo.list("my-*")
    pipe = zoo.load("my-hot-gaussian")
    assert pipe.variant == "toy" and pipe.device == "cpu" and pipe.spec.name == "my-hot-gaussian"
    assert pipe.procedures["gaussian"].params.temperature == 3.0
    x = pipe(seed=0, n=2000)
    assert 2.7 < float(x.std()) < 3.3  # temperature 3 from the user's spec, not the default 1
    pipe2 = zoo.load("my-hot-gaussian", temperature=0.5)
    assert pipe2.procedures["gaussian"].params.temperature == 0.5
