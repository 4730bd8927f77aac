"""What ``zoo run NAME`` accepts, known before anything is imported or built: the procedure's
``--key value`` options (its ``CliInputs``) and ``--param`` parameters (its ``Params``), read
from the torch-free params module the method package ships (:mod:`registry.declare`).

* :func:`precheck_run` validates ``--seed``, ``--variant``, ``--sampler``, ``--dtype``, ``--param``
  and the method's options from the spec and those models, with the build's own validation functions, so a typo is one line in well under a
  second, without importing torch (the build would take tens of seconds first).
* :func:`option_lines` lists them with types, defaults (the spec's value for a parameter the spec
  sets), bounds and descriptions, for ``zoo run NAME --help`` and ``zoo show NAME``.

A procedure whose package has no params module is checked at run time instead; ``--help`` then imports it to
list its options.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.errors import HardwareError, Location, ParamError, ZooError


@dataclass
class ProcedureInfo:
    """A procedure's static description: its name, target, its ``Params`` and ``CliInputs`` models (from its package's
    params module, :mod:`registry.declare`) and their JSON Schemas for listing (``params`` / ``cli`` ``None``: nothing
    static covers the target; ``cli`` is ``{}`` when the procedure takes no options)."""

    name: str
    target: str
    params: dict[str, Any] | None
    cli: dict[str, Any] | None
    spec_params: dict[str, Any]
    indexed: bool
    params_model: Any = None
    cli_model: Any = None


def procedure_info(spec: Any, name: str, *, import_fallback: bool = False) -> ProcedureInfo:
    """The static description of procedure ``name`` of ``spec``; with ``import_fallback`` a target no
    params module covers is imported to read its models (``--help`` only)."""
    from registry.contract import ProcedureParams
    from registry.static import schema_of, target_info

    _, proc = spec.procedure(name)
    found = target_info(proc.target)
    if found is not None and found.kinds and "procedure" in found.kinds:
        params = found.params or ProcedureParams
        return ProcedureInfo(name, proc.target, schema_of(params), schema_of(found.cli) or {}, dict(proc.params), True,
                             params, found.cli)
    if import_fallback:
        from registry.resolve import resolve

        cls = resolve(proc.target, kind="procedure")
        params = getattr(cls, "Params", None)
        cli = getattr(cls, "CliInputs", None)
        return ProcedureInfo(name, proc.target, schema_of(params), schema_of(cli) or {}, dict(proc.params), False,
                             params, cli)
    return ProcedureInfo(name, proc.target, None, None, dict(proc.params), False)


def _reliable_probe(machine: Any) -> bool:
    """Whether the torch-free probe's view of the GPUs can refuse a variant: nvidia-smi answered,
    ``CUDA_VISIBLE_DEVICES`` hides every GPU, or there is no nvidia-smi and no NVIDIA driver either
    (no ``/proc/driver/nvidia``, no ``/dev/nvidia*``); otherwise only torch knows, at build time."""
    if machine.how in ("nvidia-smi", "CUDA_VISIBLE_DEVICES"):
        return True
    if machine.how == "no nvidia-smi":
        return not Path("/proc/driver/nvidia").exists() and not any(Path("/dev").glob("nvidia*"))
    return False


def option_problem(info: ProcedureInfo, options: dict[str, str]) -> str | None:
    """The first problem of the ``--key value`` options (strings, parsed by the procedure's ``CliInputs`` with the
    function ``zoo run`` parses them with after the build) as ``zoo run`` prints it, or None (also when nothing
    static covers the procedure)."""
    from registry.calls import cli_inputs

    if info.cli is None:
        return None
    if options and info.cli_model is None:
        return f"{info.name} takes no options; got {', '.join('--' + k.replace('_', '-') for k in options)}"
    if info.cli_model is None:
        return None
    try:
        cli_inputs(info.cli_model, options, info.name)
    except ZooError as exc:
        return exc.message
    return None


def precheck_run(spec: Any, file: str | None, *, seed: Any, variant: str | None, device: str | None, dtype: str | None,
                 sampler: str | None, params: dict[str, Any], options: dict[str, str]) -> str | None:
    """Everything ``zoo run`` can check before importing torch; raises the one-line error a bad value
    gets (the same class and wording as the build's). Returns the variant the build will choose
    when that is known here (None when only torch can tell)."""
    from registry.build import check_seed, choose_variant
    from registry.hardware import device_problem, probe

    check_seed(seed, "--seed")
    machine = probe()
    # a --device this machine cannot give: what is missing (no GPU, a CPU-only torch) is torch's to say, and the
    # build says it before building anything (registry.build.build_pipeline)
    device_unusable = device is not None and device_problem(str(device), machine) is not None
    chosen: str | None
    try:
        chosen, _ = choose_variant(spec, variant, device, machine, file, sampler=sampler,
                                   spec_dir=Path(file).parent if file else None)
    except HardwareError:
        undeclared = variant is not None and variant not in spec.variants
        refused = variant is not None and not undeclared and spec.hardware[variant].refusal(variant) is not None
        if undeclared or refused or (_reliable_probe(machine) and not device_unusable):
            raise
        chosen = variant  # may fit where torch sees a GPU the probe cannot: the build decides
    # the variants the build may pick: the probe's choice, or, when only torch can tell, every runnable one
    candidates = [chosen] if chosen is not None and (variant is not None or _reliable_probe(machine)) else \
        [v for v in spec.variants if spec.hardware[v].status == "runnable"] or list(spec.variants)
    defaults = {sampler or spec.default_for(v) for v in candidates}
    name = defaults.pop() if len(defaults) == 1 else None
    declared = [*spec.samplers, *spec.recipes]
    if sampler is not None and sampler not in declared:
        raise ParamError(f"sampler {sampler!r} is not declared; declared: {', '.join(declared)}")
    if dtype is not None and not any(dtype in spec.hardware[v].dtypes for v in candidates):
        from registry.loader import locate

        v = candidates[0]
        raise HardwareError(f"dtype {dtype} not declared for variant {v} (declared: {', '.join(spec.hardware[v].dtypes)})",
                            locate(file, f"hardware.{v}.dtypes"))
    if name is None:  # different defaults on the candidate variants: the build knows which
        return chosen
    info = procedure_info(spec, name)
    if info.params_model is not None and params:
        from registry.calls import procedure_params

        from registry.loader import locate

        section, proc = spec.procedure(name)
        spec_values = {**proc.params, **(proc.params_by_variant.get(chosen, {}) if chosen else {})}
        # as the build validates them (a --param key is located at "parameter KEY", a spec key in the spec)
        procedure_params(info.params_model, spec_values, params,
                         lambda f: locate(file, f"{section}.{name}.params" + (f".{f}" if f else "")), name)
    problem = option_problem(info, options)
    if problem:
        raise ZooError(problem)
    return chosen


# ----------------------------------------------------------------------------- listing
def _resolve(s: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in s:
        s = {**defs.get(s["$ref"].rsplit("/", 1)[-1], {}), **{k: v for k, v in s.items() if k != "$ref"}}
    return s


def _members(s: dict[str, Any], defs: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The non-null alternatives of a property schema, and whether null is allowed."""
    s = _resolve(s, defs)
    alts = s.get("anyOf") or s.get("oneOf")
    if not alts:
        return [s], s.get("type") == "null"
    out, nullable = [], False
    for a in alts:
        a = _resolve(a, defs)
        if a.get("type") == "null":
            nullable = True
        else:
            out.append(a)
    return out, nullable


_TYPES = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "object": "dict"}


def _type(s: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> str:
    s = _resolve(s, defs)
    if depth > 4:
        return "..."
    if "enum" in s:
        return "|".join(str(v) for v in s["enum"])
    if "const" in s:
        return str(s["const"])
    alts = s.get("anyOf") or s.get("oneOf")
    if alts:
        return " | ".join(dict.fromkeys(_type(a, defs, depth + 1) for a in alts))
    t = s.get("type")
    if t == "array":
        items = s.get("items")
        if isinstance(items, dict):
            return f"list[{_type(items, defs, depth + 1)}]"
        prefix = s.get("prefixItems")
        if isinstance(prefix, list):
            return f"({', '.join(_type(p, defs, depth + 1) for p in prefix)})"
        return "list"
    if t == "null":
        return "none"
    return _TYPES.get(t, t or "any")


def _bounds(s: dict[str, Any], defs: dict[str, Any]) -> str:
    """``1..1000``, ``>0, <=100``, ``<= 200000 (ZOO_MAX_ROWS)``, ``at most 16 items`` for one property."""
    from registry.limits import LIMITS, limit

    parts: list[str] = []
    for m in _members(s, defs)[0]:
        kind = m.get("x-zoo-limit")
        lo = m.get("minimum")
        hi = None if kind else m.get("maximum")
        if kind in LIMITS and m.get("type") == "integer":  # an int size: its current limit is the maximum
            top = f"{limit(kind)} ({LIMITS[kind].env})"
            parts.append(f"{lo:g}..{top}" if lo is not None else f"<={top}")
            continue
        if lo is not None and hi is not None:
            parts.append(f"{lo:g}..{hi:g}" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else f"{lo}..{hi}")
        else:
            if lo is not None:
                parts.append(f">={lo:g}")
            if hi is not None:
                parts.append(f"<={hi:g}")
        if "exclusiveMinimum" in m:
            parts.append(f">{m['exclusiveMinimum']:g}")
        if "exclusiveMaximum" in m:
            parts.append(f"<{m['exclusiveMaximum']:g}")
        if kind in LIMITS:
            what = "length " if m.get("x-zoo-measure") == "longest" else "count "
            parts.append(f"{what}<={limit(kind)} ({LIMITS[kind].env})")
        for key, word in (("maxLength", "characters"), ("maxItems", "items")):
            if key in m and not (key == "maxItems" and kind):
                parts.append(f"at most {m[key]} {word}")
    return ", ".join(dict.fromkeys(parts))


def _show(value: Any) -> str:
    import json

    if value is None:
        return "none"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _rows(schema: dict[str, Any], values: dict[str, Any], flag: bool) -> list[list[str]]:
    defs = schema.get("$defs", {})
    rows = []
    for key, prop in schema.get("properties", {}).items():
        name = "--" + key.replace("_", "-") if flag else key
        if key in values:
            default = f"= {_show(values[key])} (spec)"
        elif "default" in prop:
            default = f"= {_show(prop['default'])}"
        else:
            default = "(required)"
        desc = " ".join(str(_resolve(prop, defs).get("description", "")).split())
        rows.append([name, _type(prop, defs), default, _bounds(prop, defs), desc])
    return rows


def option_lines(spec: Any, name: str, *, import_fallback: bool = False, indent: str = "  ", spec_values: bool = True) -> list[str]:
    """Lines listing procedure ``name``'s ``--key value`` options and ``--param`` parameters (with
    ``spec_values``, a parameter the spec sets shows the spec's value, else the class default)."""
    from zoo.cli import _table

    info = procedure_info(spec, name, import_fallback=import_fallback)
    if not spec_values:
        info.spec_params = {}
    if info.params is None and info.cli is None:
        return [f"{indent}(no params module covers {info.target}: `zoo run {spec.name} --sampler {name} --help` "
                "imports it to list its options)"]
    out: list[str] = []
    cli_rows = _rows(info.cli, {}, True) if info.cli else []
    out.append(f"{indent}options (--key value):" if cli_rows else f"{indent}options: none")
    out += _table(cli_rows, indent + "  ")
    par_rows = _rows(info.params, info.spec_params, False) if info.params else []
    out.append(f"{indent}parameters (--param KEY=VALUE, or KEY=value in Python):" if par_rows else f"{indent}parameters: none")
    out += _table(par_rows, indent + "  ")
    return out
