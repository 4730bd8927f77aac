"""``zoo run`` checks everything the spec and the static parameter information can
tell before importing torch or building (each of these failed after 45-53 s, torch imported first),
and ``zoo run NAME --help`` / ``zoo show NAME`` list the method's options with types, defaults and
bounds. Each command runs in a fresh interpreter whose ``import torch`` raises, so a check that needs
torch shows up as that error instead of the expected one line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

BLOCK_TORCH = textwrap.dedent("""
    import sys

    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("TORCH-IMPORTED: " + name)
            return None

    sys.meta_path.insert(0, _NoTorch())
    from zoo.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def zoo_no_torch(*argv: str) -> subprocess.CompletedProcess[str]:
    """``zoo ARGV`` in a subprocess where importing torch fails; the probe sees no GPU (CUDA_VISIBLE_DEVICES
    empty), so the variant choice is the CPU one on any machine."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH, *argv], capture_output=True, text=True, env=env, timeout=120)


PARAMS = ("num_inference_steps, solver_order, first_eps, data_mean, timestep_spacing, use_karras_sigmas, sigma_min, "
          "sigma_max, rho")  # the model's own order: the build's message


@pytest.mark.parametrize("args, expected", [
    (["--seed", "-1"], "--seed: expected an integer in [0, 2**63 - 1], got -1"),
    (["--param", "x=0"], f"parameter x: unknown parameter of f-ddim; expected one of: {PARAMS}"),
    (["--param", "num_inference_steps=0"], "parameter num_inference_steps: Input should be greater than or equal to 1 (got 0)"),
    (["--param", "num_inference_steps=true"], "parameter num_inference_steps: expected an integer, got a boolean (got True)"),
    (["--nfe", "ten"], "--nfe: Input should be a valid integer, unable to parse string as an integer (got 'ten') "
                       "(options of f-ddim: --nfe, --n, --out)"),
    (["--bogus"], "--bogus: unknown option (options of f-ddim: --nfe, --n, --out)"),
    (["--n", "200001"], "--n: 200001 is above the per-call limit of 200000 rows (raise it deliberately with ZOO_MAX_ROWS=N"),
    (["--variant", "tiny"], "variants: variant 'tiny' is not declared; declared: full, toy, digits"),
    (["--dtype", "float16"], "hardware.toy.dtypes: dtype float16 not declared for variant toy (declared: float64)"),
    (["--sampler", "nope"], "sampler 'nope' is not declared; declared: f-ddim, "),
    (["--variant", "full"], "hardware.full: variant full needs cuda with ≥2 GB"),
])
def test_bad_run_options_fail_in_one_line_without_importing_torch(args: list[str], expected: str) -> None:
    res = zoo_no_torch("run", "f-dpmsolver", *args)
    assert "TORCH-IMPORTED" not in res.stderr + res.stdout, res.stderr[-2000:]
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], res.stderr


def test_a_good_run_gets_past_the_checks_to_the_build() -> None:
    """Control: valid options pass every pre-build check, so the first torch import is the build's."""
    res = zoo_no_torch("run", "f-dpmsolver", "--nfe", "5", "--n", "4", "--param", "solver_order=2", "--seed", "3",
                       "--param", "sigma_min=2e-3")  # a number YAML 1.1 leaves a string: the command line reads it as one
    assert "TORCH-IMPORTED" in res.stderr, res.stderr[-2000:]


def test_run_help_lists_the_methods_options_and_parameters_without_torch() -> None:
    res = zoo_no_torch("run", "f-dpmsolver", "--help")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "TORCH-IMPORTED" not in out + res.stderr
    assert "usage: zoo run" in out and "f-dpmsolver (f-ddim; --sampler NAME for another: f-dpmsolver-2" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("    ") and line.split()}
    assert rows["--nfe"].split()[1:5] == ["int", "|", "none", "="] and "1..1000" in rows["--nfe"]
    assert "= 2000" in rows["--n"] and "1..200000 (ZOO_MAX_ROWS)" in rows["--n"] and "number of samples" in rows["--n"]
    assert "str | none" in rows["--out"]
    steps = rows["num_inference_steps"]
    assert " int " in steps and "= 10 (spec)" in steps and "1..1000" in steps  # the spec's value, not the class default
    assert "approx|mean|evaluate" in rows["first_eps"]
    assert "rows" in rows and "ZOO_MAX_ROWS" in rows["rows"]  # the per-call limits and how to raise them
    assert "--sampler" in zoo_no_torch("run", "--help").stdout  # without a name: the command's own help


def test_show_lists_each_procedures_options() -> None:
    res = zoo_no_torch("show", "ramac", "--no-detect")
    assert res.returncode == 0 and "TORCH-IMPORTED" not in res.stdout + res.stderr, res.stderr
    out = res.stdout
    assert "zoo run options of zoo.methods.ramac:Act (act, act-bc-only" in out
    act = out.split("zoo run options of zoo.methods.ramac:Act", 1)[1].split("zoo run options of", 1)[0]
    assert "--n" in act and "1..200000 (ZOO_MAX_ROWS)" in act and "number of actions" in act
    assert "parameters (--param KEY=VALUE" in act
