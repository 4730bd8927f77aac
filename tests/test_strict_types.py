"""A boolean is not a number and a number is not a boolean, wherever a spec or a caller
sets parameters -- ``ProcedureParams``, ``FactoryParams``, per-call inputs -- and numeric strings pass
only where the command line's strings are parsed (``CliInputs``). ``num_inference_steps: true`` used to
validate and run one step. The static path (``zoo validate`` through ``zoo-index.json``) agrees."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


PROBES: list[Any] = [True, False, 0, 1, 3, 2.5, "1", "2.5", "true", "x", None, [1], [True]]


def _params_model(obj: Any, kinds: list[str]) -> Any:
    """The runtime model behind an index entry's ``params`` schema, by the kind that wrote it
    (the order of ``tools/gen_static_index.py``: a later kind's schema replaces an earlier one's)."""
    from registry import contract

    model = None
    if "procedure" in kinds:
        model = obj.Params
    if "factory" in kinds:
        model = contract.factory_params(obj)
    if "metric_check" in kinds:
        model = contract.check_params_model(obj)
    if "transform" in kinds:
        model = contract.transform_params(obj)
    if "trainer" in kinds or "benchmark" in kinds:
        model = obj.zoo_options
    return model


def test_static_check_agrees_with_the_runtime_models_on_every_indexed_params_and_config() -> None:
    """For every procedure ``Params`` and factory ``config`` of every shipped index, each field probed with
    booleans, numbers, numeric strings, None and lists: the static check refuses a value exactly when the
    pydantic model refuses it for that field (errors located at the field; cross-field validators aside)."""
    from registry.static import check_values

    checked = 0
    disagreements = []
    for index in sorted((ROOT / "zoo").rglob("zoo-index.json")):
        targets = json.loads(index.read_text())["targets"]
        for target, entry in targets.items():
            schema = entry.get("params")
            if not schema or not schema.get("properties"):
                continue
            module, attr = target.split(":")
            obj = getattr(importlib.import_module(module), attr)
            model = _params_model(obj, entry["kinds"])
            for field in schema["properties"]:
                for value in PROBES:
                    static_ok = check_values(schema, {field: value}) == []
                    try:
                        model.model_validate({field: value})
                        runtime_ok = True
                    except ValidationError as exc:
                        runtime_ok = not any(e["loc"][:1] == (field,) for e in exc.errors())
                    checked += 1
                    if static_ok != runtime_ok:
                        disagreements.append(f"{target}.{field}={value!r}: static {'accepts' if static_ok else 'refuses'}, "
                                             f"runtime {'accepts' if runtime_ok else 'refuses'}")
    assert checked > 1000
    assert not disagreements, "\n".join(disagreements[:20]) + f"\n({len(disagreements)} in all)"
