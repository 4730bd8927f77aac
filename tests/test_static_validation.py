"""``zoo validate`` checks procedure parameters, factory configs, registration and
``model_class`` names statically (with the models of each package's torch-free params module,
:mod:`registry.declare`, and the generated transformers/diffusers/timm name list), with file:line:col,
without importing torch or the method's code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

SPEC = """name: my-f-ddim
title: F-DDIM on the exact mixture
task: unconditional-sampling
implementation: zoo.methods.f_dpmsolver
models:
  denoiser:
    kind: vp-diffusion-model
    variants:
      toy: {source: zoo, factory: "zoo.common.gmm:analytic_model", config: {mixture: gmm3}}
      hub:
        source: diffusers
        model_class: UNet2DModel
        id: google/ddpm-cifar10-32
        revision: 39cc2524c6bdb73517ac48d0c6f49b976e8dc0ba
samplers:
  f-ddim:
    target: "zoo.methods.f_dpmsolver:FDPMSolverSampler"
    params: {num_inference_steps: 20, solver_order: 1}
default: f-ddim
variants: [toy, hub]
hardware: {toy: {accelerator: cpu, dtypes: [float64]}, hub: {accelerator: cuda}}
"""


def validate(tmp_path: Path, text: str) -> tuple[int, str, list[str]]:
    """Run ``zoo validate`` in a fresh interpreter: exit code, output, heavy modules it imported."""
    spec = tmp_path / "my-f-ddim.yaml"
    spec.write_text(text)
    code = ("import sys, json\nfrom zoo.cli import main\nrc = main(['validate', sys.argv[1]])\n"
            "heavy = [m for m in ('torch', 'diffusers', 'transformers', 'timm', 'numpy') if m in sys.modules]\n"
            "heavy += sorted(m for m in sys.modules if m.startswith('zoo.') and m.count('.') >= 2 and not m.endswith('.params')"
            " and m.rsplit('.', 1)[0] not in ('zoo', 'zoo.methods')  # packages (lazy __init__) and their params modules only\n"
            " and m not in ('zoo.common.lazy', 'zoo.common.out_files', 'zoo.common.deprecation')"
            " and getattr(sys.modules[m], '__file__', None))  # alias placeholders (install_aliases) have no file\n"
            "print(json.dumps(heavy))\nsys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True, text=True, cwd=tmp_path)
    lines = res.stdout.strip().splitlines()
    return res.returncode, "\n".join(lines[:-1]) + res.stderr, json.loads(lines[-1])


def test_valid_spec_passes_without_importing_torch(tmp_path: Path) -> None:
    rc, out, heavy = validate(tmp_path, SPEC)
    assert rc == 0, out
    assert heavy == []


@pytest.mark.parametrize("old, new, where, expected", [
    ("solver_order: 1}", "solver_ordr: 1}", "18:39", "samplers.f-ddim.params.solver_ordr: unknown parameter of f-ddim; did you mean 'solver_order'?"),
    ("num_inference_steps: 20", "num_inference_steps: twenty", "18:14", "num_inference_steps: expected an integer, got a string (got 'twenty')"),
    ("num_inference_steps: 20", "num_inference_steps: true", "18:14", "num_inference_steps: expected an integer, got a boolean (got True)"),
    ("num_inference_steps: 20", "num_inference_steps: '20'", "18:14", "num_inference_steps: expected an integer, got a string; write 20 without quotes (got '20')"),
    ("num_inference_steps: 20", "num_inference_steps: 0", "18:14", "num_inference_steps: Input should be greater than or equal to 1 (got 0)"),
    ("model_class: UNet2DModel", "model_class: UNet2DModle", "12:9", "diffusers has no class 'UNet2DModle'; did you mean 'UNet2DModel'?"),
    ("config: {mixture: gmm3}", "config: {mixture: gmm3, scale: 2}", "9:92", "config.scale: unknown parameter"),
    ("FDPMSolverSampler\"", "FDPMSolverSamplr\"", "17:5", "'zoo.methods.f_dpmsolver:FDPMSolverSamplr' is not registered as a procedure"),
])
def test_validate_catches_bad_params_classes_and_targets_statically(tmp_path: Path, old: str, new: str, where: str, expected: str) -> None:
    """Each mistake is one located line from ``zoo validate`` (exit 2), with torch never imported."""
    assert old in SPEC
    rc, out, heavy = validate(tmp_path, SPEC.replace(old, new, 1))
    assert rc == 2, out
    line = next(ln for ln in out.splitlines() if "my-f-ddim.yaml:" in ln)
    assert line.split("my-f-ddim.yaml:", 1)[1].startswith(where + ":"), line
    assert expected in line, line
    assert heavy == []


def test_validate_catches_a_misspelt_timm_architecture_statically(tmp_path: Path) -> None:
    """A timm role's ``model_name`` is checked against timm's registered architectures (recorded by
    tools/gen_library_names.py): a typo is one located line with a suggestion, a real name passes, and
    neither imports torch or timm."""
    timm_role = ("  detector:\n    kind: image-classifier\n    variants:\n"
                 "      toy: {source: timm, model_name: test_resnet, kwargs: {in_chans: 1, num_classes: 2}}\n")
    text = SPEC.replace("samplers:\n", timm_role + "samplers:\n", 1)
    rc, out, heavy = validate(tmp_path, text)
    assert rc == 0, out
    assert heavy == []
    rc, out, heavy = validate(tmp_path, text.replace("model_name: test_resnet", "model_name: test_resnt"))
    assert rc == 2, out
    line = next(ln for ln in out.splitlines() if "my-f-ddim.yaml:" in ln)
    assert line.split("my-f-ddim.yaml:", 1)[1].startswith("18:27:"), line
    assert "timm has no model 'test_resnt'; did you mean 'test_resnet'?" in line, line
    assert heavy == []


def test_validate_uses_the_models_the_build_uses(tmp_path: Path) -> None:
    """One validation path: the model ``zoo validate`` reads for the f-dpmsolver sampler *is* its ``Params``, and a
    spec's values (valid, ill-typed, out-of-range, unknown) are refused by ``zoo validate``'s lint exactly when the
    build refuses them (same function, :func:`registry.calls.procedure_params`)."""
    from registry.errors import ParamError
    from registry.lint import lint
    from registry.loader import load_spec_file
    from registry.static import target_info
    from zoo.methods.f_dpmsolver import FDPMSolverSampler

    assert target_info("zoo.methods.f_dpmsolver:FDPMSolverSampler").params is FDPMSolverSampler.Params
    cases = [{"num_inference_steps": 5}, {"num_inference_steps": 5.0}, {"num_inference_steps": 5.5}, {"num_inference_steps": "7"},
             {"num_inference_steps": 0}, {"num_inference_steps": 1001}, {"solver_order": 3}, {"solver_order": 4},
             {"first_eps": "mean"}, {"first_eps": "median"}, {"data_mean": [0.1, 0.2]}, {"data_mean": []},
             {"data_mean": 0.5}, {"data_mean": None}, {"use_karras_sigmas": True}, {"rho": 0}, {"rho": 7},
             {"sigma_min": 1e-7}, {"timestep_spacing": "leading"}, {"nope": 1},
             {"num_inference_steps": True}, {"num_inference_steps": False}, {"rho": True}, {"rho": "7"},
             {"use_karras_sigmas": 1}, {"use_karras_sigmas": "true"}, {"use_karras_sigmas": 0.0}, {"data_mean": [0.1, True]}]
    import json as _json

    from registry.calls import procedure_params

    for i, values in enumerate(cases):
        spec = tmp_path / f"case{i}.yaml"
        spec.write_text(SPEC.replace("params: {num_inference_steps: 20, solver_order: 1}", f"params: {_json.dumps(values)}"))
        try:
            procedure_params(FDPMSolverSampler.Params, values, {}, lambda f: None, "f-ddim")
            built = True
        except ParamError:
            built = False
        assert (lint(load_spec_file(spec), spec, resolve=True) == []) == built, values


def test_committed_library_names_are_fresh() -> None:
    """registry/library_names.json equals what ``tools/gen_library_names.py`` generates now."""
    import gen_library_names

    for path, text in gen_library_names.outputs().items():
        assert path.is_file() and path.read_text() == text, f"{path} is stale: run python tools/gen_library_names.py"
