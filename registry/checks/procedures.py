"""The procedure contract, for every sampler and recipe: every size it accepts is bounded; on the first runnable
CPU variant that has its roles, it is seeded-deterministic and leaves the cached models unchanged, its parameters are
validated strictly (unknown names, a boolean for a number and the reverse are refused), it is batch-independent
where declared, it keeps ``zoo sample``'s population contract where it declares one, and a recipe that
``produces`` a role returns weights that reload into that role's factory."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..catalog import Entry
from ..errors import ParamError, ZooError
from .base import (Check, Skipped, SpecUnderCheck, assert_models_unchanged, assert_same, family, procedure_variant,
                   snapshot_models, spec_source)


@family
def bounded_inputs(s: SpecUnderCheck) -> list[Check]:
    """Every size a procedure accepts is bounded (call inputs, Params, CliInputs): needs an import, no build."""
    spec = s.spec
    checks: list[Check] = []
    for pname in [*spec.samplers, *spec.recipes]:
        section = "samplers" if pname in spec.samplers else "recipes"

        def bounded(pname: str = pname) -> None:
            from ..inputs import unbounded_inputs
            from ..resolve import resolve

            target = spec.procedure(pname)[1].target
            problems = unbounded_inputs(resolve(target, kind="procedure"))
            assert not problems, f"{pname} ({target}) accepts unbounded sizes: " + "; ".join(problems)

        checks.append(s.check(f"{section}[{pname}]::bounded-inputs", bounded))
    return checks


@family
def procedure_contract(s: SpecUnderCheck) -> list[Check]:
    """Each check binds its own ``procedure`` as a default argument: a closure would see the last loop iteration's."""
    spec = s.spec
    checks: list[Check] = []
    if not s.cpu:
        return checks
    for pname in [*spec.samplers, *spec.recipes]:
        section = "samplers" if pname in spec.samplers else "recipes"
        v0, no_variant = procedure_variant(spec, pname)

        def procedure(pname: str = pname, v0: str | None = v0, why: str = no_variant) -> tuple[Any, Any]:
            if v0 is None:
                raise Skipped(why)
            pipe = s.pipeline(v0)
            return pipe, pipe.procedures[pname]

        at = f"{section}[{pname}]::"
        checks.append(s.check(at + "seeded-determinism", lambda pname=pname, procedure=procedure: _determinism(pname, procedure)))
        checks.append(s.check(at + "param-validation", lambda pname=pname, v0=v0, procedure=procedure: _param_validation(s, pname, v0, procedure)))
        target = spec.procedure(pname)[1].target
        if section == "samplers" or (not s.missing and _declares_batch_independence(target)):
            checks.append(s.check(at + "batch-independence", lambda pname=pname, procedure=procedure: _batch_independence(pname, procedure)))
        declared = _declares_population(target) if section == "samplers" else None
        if declared is not None:
            checks.append(s.check(at + declared, lambda pname=pname, procedure=procedure: _check_population(
                *procedure(pname), pname, exact=s.target.device == "cpu")))
        produced = spec.procedure(pname)[1].produces
        if produced is not None:
            checks.append(s.check(at + f"produces[{produced}]", lambda pname=pname, role=produced, procedure=procedure: _check_produces(
                s.entry, *procedure(pname), pname, role)))
    return checks


def _determinism(pname: str, procedure: Any) -> None:
    pipe, proc = procedure(pname)
    before = snapshot_models(pipe.models)
    inputs = proc.example_inputs(2)
    first = proc(seed=1234, **inputs)
    second = proc(seed=1234, **inputs)
    assert_models_unchanged(before, pipe.models, f"{pname}")
    assert_same(first, second)


def _param_validation(s: SpecUnderCheck, pname: str, v0: str | None, procedure: Any) -> None:
    from ..build import make_procedure
    from ..inputs import scalar_kinds

    spec, file, target = s.spec, s.file, s.target
    pipe, _ = procedure(pname)
    try:
        make_procedure(spec, pname, pipe.models, target.device, target.dtype, {"__not_a_parameter__": 1}, file, v0)
    except ParamError as exc:
        assert "unknown parameter" in str(exc), str(exc)
    else:
        raise AssertionError(f"{pname}: unknown parameter was accepted")
    cls = type(pipe.procedures[pname])
    typed = [f for f, info in cls.Params.model_fields.items() if info.annotation not in (Any, object)]
    # strict types: a boolean for a number, a number for a boolean, a numeric string (YAML `steps: true`,
    # `steps: "10"`) are refused, never coerced (registry.inputs.strict_problem)
    wrong: list[tuple[str, Any]] = [(typed[0], object())] if typed else []
    for f, info in cls.Params.model_fields.items():
        kinds = scalar_kinds(info.annotation) or set()
        if kinds & {"int", "float"} and "bool" not in kinds:
            wrong += [(f, True), (f, "1")]
            break
    for f, info in cls.Params.model_fields.items():
        kinds = scalar_kinds(info.annotation) or set()
        if "bool" in kinds and not kinds & {"int", "float", "str"}:
            wrong.append((f, 1))
            break
    for key, value in wrong:
        try:
            make_procedure(spec, pname, pipe.models, target.device, target.dtype, {key: value}, file, v0)
        except ParamError as exc:
            assert key in str(exc), f"error does not name the parameter: {exc}"
        else:
            raise AssertionError(f"{pname}: parameter {key} accepted {value!r} ({type(value).__name__})")


def _batch_independence(pname: str, procedure: Any) -> None:
    pipe, proc = procedure(pname)
    if not getattr(proc, "batch_independent", False):
        raise Skipped(f"{pname} does not declare batch_independent")
    before = snapshot_models(pipe.models)
    inputs = proc.example_inputs(3)
    rows = proc.output_rows(proc(seed=7, **inputs))
    singles = proc.input_rows(inputs)
    assert len(rows) == len(singles), f"{len(rows)} output rows for {len(singles)} input rows"
    for i, single in enumerate(singles):
        alone = proc.output_rows(proc(seed=7, **single))
        assert len(alone) == 1
        assert_same(rows[i], alone[0], exact=False, path=f"row {i}")
    assert_models_unchanged(before, pipe.models, pname)


def _check_produces(entry: Entry, pipe: Any, proc: Any, pname: str, role: str) -> None:
    """A training recipe's output reloads into ``role``'s factory with ``strict=True``: run it on its
    example inputs (a tiny budget), save what it returns as safetensors, load it back."""
    from ..build import build_model
    from ..loader import locate
    from ..weights import save_state, sha256_file

    src = spec_source(entry, role, pipe.variant)
    if src.with_local_weights("-", "0" * 64) is None:
        raise AssertionError(f"{pname} produces {role!r}, whose {pipe.variant} source is not a factory (source: zoo)")
    before = snapshot_models(pipe.models)
    out = proc(seed=0, **proc.example_inputs(2))
    assert_models_unchanged(before, pipe.models, pname)
    if hasattr(out, "state_dict") and callable(out.state_dict):
        state = out.state_dict()
    elif isinstance(out, dict):
        state = out
    else:
        raise AssertionError(f"{pname} produces {role!r} but returned a {type(out).__name__} (expected a module or a state dict)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{role}.safetensors"
        save_state({k: v.detach().cpu() for k, v in state.items()}, path)
        local = src.with_local_weights(str(path), sha256_file(path))
        build_model(local, spec_dir=entry.path.parent, device="cpu", loc=locate(str(entry.path), f"recipes.{pname}.produces"),
                    allow_outside_paths=True)  # the harness's own temp file

def _declares_population(target: str) -> str | None:
    """The check a sampler's class gets for ``zoo sample``: ``per-row-seeds`` (it sets ``per_row_seeds``),
    ``population`` (it is batch-independent and defines ``population_inputs`` only), or ``None``."""
    from ..contract import Procedure
    from ..resolve import resolve

    try:
        cls = resolve(target, kind="procedure")
    except Exception:  # noqa: BLE001 - an unresolvable target fails the build checks instead
        return None
    if getattr(cls, "per_row_seeds", False):
        return "per-row-seeds"
    defines = getattr(cls, "population_inputs", None) is not Procedure.population_inputs
    return "population" if defines and getattr(cls, "batch_independent", False) else None

def _check_population(pipe: Any, proc: Any, pname: str, exact: bool = True) -> None:
    """``zoo sample``'s contract (:mod:`registry.sampling`): rows 0 and 1 of the population drawn in one call with
    per-row seeds equal the one-row calls ``proc(seed=s_j, **proc.population_inputs(j, j + 1))`` bit for bit on the
    CPU (``exact``: ``zoo sample`` then gives byte-identical rows whatever the batch size; on an accelerator, whose
    batched kernels may round per batch shape, to the harness's float tolerance), and the output splits into
    per-row and per-call fields. Without ``per_row_seeds`` only the one-row calls and their split are checked.
    Two rows suffice for the planted errors (every row on the first seed, an input that depends on where the call
    starts, a drift with the batch size) and keep the check cheap for the slow text samplers."""
    from ..contract import row_seed
    from ..sampling import row_of, split_rows

    before = snapshot_models(pipe.models)
    seeds = [row_seed(7, j) for j in range(2)]
    singles = [split_rows(proc(seed=s, **proc.population_inputs(j, j + 1)), 1, proc) for j, s in enumerate(seeds)]
    if getattr(proc, "per_row_seeds", False):
        batch = split_rows(proc(seed=seeds, **proc.population_inputs(0, 2)), 2, proc)
        assert batch.kinds == singles[0].kinds, f"{pname}: fields of a 2-row call {batch.kinds} vs a one-row call {singles[0].kinds}"
        for j, single in enumerate(singles):
            assert_same(row_of(batch, j), row_of(single, 0), exact=exact, path=f"row {j} (per-row seeds)")
    assert_models_unchanged(before, pipe.models, pname)

def _declares_batch_independence(target: str) -> bool:
    """Whether a recipe's class sets ``batch_independent`` (recipes that do not get no check, instead
    of a SKIP per analysis); if the target does not resolve, the check is kept and reports why."""
    from ..resolve import resolve

    try:
        return bool(getattr(resolve(target, kind="procedure"), "batch_independent", False))
    except ZooError:
        return True
