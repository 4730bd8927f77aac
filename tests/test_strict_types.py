"""A boolean is not a number and a number is not a boolean, wherever a spec or a caller
sets parameters -- ``ProcedureParams``, ``FactoryParams``, per-call inputs -- and numeric strings pass
only where the command line's strings are parsed (``CliInputs``). ``num_inference_steps: true`` used to
validate and run one step. ``zoo validate`` validates with the same models (each package's params module,
:mod:`registry.declare`), so the static path agrees by construction."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import zoo
from registry.errors import ParamError

ROOT = Path(__file__).resolve().parents[1]


def _spec(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "steps.yaml"
    path.write_text("extends: f-dpmsolver\nname: strict-steps\nmetrics: []\n"
                    f"samplers:\n  f-ddim:\n    params: {{num_inference_steps: {value}}}\n")
    return path


@pytest.mark.parametrize("value, why", [("true", "expected an integer, got a boolean (got True)"),
                                        ("'10'", "expected an integer, got a string; write 10 without quotes (got '10')"),
                                        ("1e1", "expected an integer, got a string; YAML reads '1e1' as a string: write 1.0e+01 (got '1e1')")])
def test_a_spec_setting_a_number_to_a_boolean_or_a_string_is_refused_statically_and_at_build(tmp_path: Path, value: str, why: str) -> None:
    path = _spec(tmp_path, value)
    res = subprocess.run([sys.executable, "-m", "zoo.cli", "validate", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = res.stderr.strip()
    assert line.startswith(f"{path}:6:14:") and f"samplers.f-ddim.params.num_inference_steps: {why}" in line, line
    with pytest.raises(ParamError) as exc:
        zoo.load(str(path), variant="toy")
    assert f"samplers.f-ddim.params.num_inference_steps: {why}" in str(exc.value) and str(exc.value).startswith(str(path)), exc.value


def test_python_callers_get_the_same_refusals() -> None:
    with pytest.raises(ParamError, match=r"^parameter num_inference_steps: expected an integer, got a boolean \(got True\)$"):
        zoo.load("f-dpmsolver", variant="toy", num_inference_steps=True)
    pipe = zoo.load("f-dpmsolver", variant="toy")
    with pytest.raises(ParamError, match=r"^input batch_size of FDPMSolverSampler: expected an integer, got a boolean"):
        pipe(seed=0, batch_size=True)
    with pytest.raises(ParamError, match=r"^input batch_size of FDPMSolverSampler: expected an integer, got a string"):
        pipe(seed=0, batch_size="4")
    with pytest.raises(ParamError, match=r"^parameter use_karras_sigmas: expected a boolean \(true or false\), got a number"):
        pipe(seed=0, batch_size=2, use_karras_sigmas=1)
    assert pipe(seed=0, batch_size=2, num_inference_steps=3.0).samples.shape == (2, 2)  # an integral float stays an int


def test_factory_configs_are_strict_too() -> None:
    from registry.build import factory_kwargs
    from registry.errors import Location
    from zoo_demo_plugin import build_affine

    where = lambda f: Location(field=f)  # noqa: E731
    assert factory_kwargs(build_affine, {"dim": 3}, where) == {"dim": 3}
    for bad, why in ((True, "got a boolean"), ("3", "got a string")):
        with pytest.raises(ParamError, match=f"^config.dim: expected an integer, {why}"):
            factory_kwargs(build_affine, {"dim": bad}, where)


def test_cli_inputs_still_parse_the_command_lines_strings() -> None:
    from zoo.common.scheduler_samplers import SamplerCli

    assert SamplerCli(nfe="10", n="5").nfe == 10
    with pytest.raises(ValidationError):
        SamplerCli(nfe="ten")


def test_a_params_model_that_opts_out_of_strictness_fails_conformance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control of the param-validation check: a Params model whose validator undoes the strict
    scalars (coerces True to 1) is caught; the strict one passes."""
    from engine_ext_helpers import planted_check

    status = {}
    for pkg, extra in (("zoo_lax_plugin", "    @field_validator('*', mode='before')\n    @classmethod\n"
                                         "    def _zoo_strict_scalars(cls, v, info):\n        return v\n"),
                       ("zoo_strict_plugin", "")):
        code = ("from pydantic import Field, field_validator\nfrom registry.contract import Procedure, ProcedureParams\n\n\n"
                "class Params(ProcedureParams):\n    steps: int = Field(3, ge=1, le=100)\n" + extra +
                "\n\nclass Count(Procedure):\n    Params = Params\n\n    def __call__(self, *, seed: int = 0):\n"
                "        return self.params.steps\n")
        status[pkg] = planted_check(tmp_path, monkeypatch, pkg, code, "Count", "param-validation")
    assert status["zoo_lax_plugin"][0] == "FAIL" and "parameter steps accepted True" in status["zoo_lax_plugin"][1], status
    assert status["zoo_strict_plugin"][0] == "PASS", status
