"""Third-party method packages.

`zoo new NAME --template sampler|recipe` scaffolds a package that passes the conformance suite as
generated; an installed plugin (a wheel's layout: package + .dist-info with the `zoo.specs` and
`zoo.plugins` entry points) is listed without importing it or torch, and checked through its entry points.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli import main

REPO = Path(__file__).resolve().parents[1]


def _bench_registry():
    spec = importlib.util.spec_from_file_location("bench_registry", REPO / "tools" / "bench_registry.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("template,name", [("sampler", "my-tempered-sampler"), ("recipe", "my-moments-recipe")])
def test_zoo_new_scaffold_passes_zoo_check_as_generated(template: str, name: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every conformance check of the generated spec passes (none skipped), and `zoo run` runs it."""
    assert main(["new", name, "--template", template, "--dir", str(tmp_path)]) == 0
    root, pkg = tmp_path / name, name.replace("-", "_")
    assert {"pyproject.toml", f"{pkg}/invariants.py", f"{pkg}/specs/{name}.yaml", f"tests/test_{pkg}.py"} <= {
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert '[project.entry-points."zoo.specs"]' in (root / "pyproject.toml").read_text()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", f"zoo_demo_plugin,{pkg}")
    spec = str(root / pkg / "specs" / f"{name}.yaml")
    capsys.readouterr()
    assert main(["validate", spec]) == 0
    from registry.declare import report

    lines = report(pkg)  # every registered callable declared in the plugin's params module, with the code's models
    assert len(lines) >= 3 and all(ln.endswith("[OK]") for ln in lines), lines
    assert main(["check", spec, "--no-record"]) == 0
    out = capsys.readouterr().out
    assert " 0 failed, 0 skipped" in out and "invariant[" in out and "metric[" in out
    assert main(["run", spec]) == 0
    assert "mean" in capsys.readouterr().out
    # the generated procedure follows the project's output rule: a typed ProcedureOutput dataclass
    import dataclasses

    import zoo
    from registry.results import ProcedureOutput

    out = zoo.load(spec)(seed=0)
    assert isinstance(out, ProcedureOutput) and dataclasses.is_dataclass(out), type(out)
    fields = [f.name for f in dataclasses.fields(out)]
    assert list(out.keys()) == fields and out.to_tuple() == tuple(getattr(out, f) for f in fields)
    assert all(f"``{f}``" in (type(out).__doc__ or "") for f in fields)  # each field documented


def _scaffold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "my-typo-sampler") -> tuple[Path, str, Path]:
    assert main(["new", name, "--template", "sampler", "--dir", str(tmp_path)]) == 0
    root, pkg = tmp_path / name, name.replace("-", "_")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", pkg)
    return root, pkg, root / pkg / "specs" / f"{name}.yaml"


@pytest.mark.parametrize("with_params_module", [True, False])
def test_a_plugin_spec_is_validated_as_strictly_with_or_without_a_params_module(
        with_params_module: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt sampler parameter, a wrong type and a factory config typo in a plugin's spec are located one-line
    errors of `zoo validate` whether the plugin keeps its models in a params module (read without importing its
    code) or not (its code is imported and its own models validate, the same way)."""
    root, pkg, spec = _scaffold(tmp_path, monkeypatch, f"my-strict-{'with' if with_params_module else 'without'}")
    if not with_params_module:  # the models stay, under another module name: no params module to read
        (root / pkg / "params.py").rename(root / pkg / "models.py")
        for f in (root / pkg).glob("*.py"):
            f.write_text(f.read_text().replace("from .params import", "from .models import"))
    text = spec.read_text()
    assert "temperature: 1.0" in text and "dim: 2" in text, text
    for old, new, expected in [("temperature: 1.0", "temperatur: 1.0", "temperatur: unknown parameter of tempered; did you mean 'temperature'?"),
                               ("temperature: 1.0", "temperature: true", "expected a number, got a boolean"),
                               ("dim: 2", "dimm: 2", "config.dimm: unknown parameter; did you mean 'dim'?")]:
        spec.write_text(text.replace(old, new, 1))
        capsys.readouterr()
        assert main(["validate", str(spec)]) == 2, new
        err = capsys.readouterr()
        assert expected in err.out + err.err, (new, err)
    spec.write_text(text)
    assert main(["validate", str(spec)]) == 0


def test_a_params_module_naming_other_models_than_the_code_is_refused_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Negative control of the agreement rule: a params module whose TARGETS names a model the code does not use
    (a stale declaration) makes the build refuse the target in one line naming the params module."""
    root, pkg, spec = _scaffold(tmp_path, monkeypatch, "my-stale-sampler")
    params = root / pkg / "params.py"
    params.write_text(params.read_text().replace('declare.procedure(MyStaleSamplerSamplerParams,', 'declare.procedure(ModelConfig,'))
    assert "declare.procedure(ModelConfig," in params.read_text()
    capsys.readouterr()
    assert main(["run", str(spec)]) != 0
    err = capsys.readouterr().err
    assert "params.py declares params model" in err and "the implementation uses" in err, err


def test_zoo_new_refuses_bad_names_and_existing_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "My_Sampler", "--dir", str(tmp_path)]) == 2
    assert "kebab-case" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert main(["new", "taken", "--dir", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_installed_plugin_is_listed_without_importing_it_and_checked_via_entry_points(tmp_path: Path) -> None:
    """`zoo list` reads an installed plugin's specs without importing the plugin (whose __init__
    imports torch); `zoo check NAME` finds and allows it through its entry points alone."""
    pkg = _bench_registry().install_plugin(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_ALLOWED_PACKAGES", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path)
    code = f"import sys; from zoo.cli import main; main(['list']); print('torch' in sys.modules, {pkg!r} in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    *lines, flags = res.stdout.splitlines()
    assert any(line.startswith("zoo-bench-plugin ") for line in lines)
    assert flags == "False False"  # neither torch nor the plugin package was imported
    res = subprocess.run([sys.executable, "-m", "zoo.cli", "check", "zoo-bench-plugin", "--no-record"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "9 passed, 0 failed, 0 skipped" in res.stdout  # incl. bounded-inputs
