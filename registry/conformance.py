"""The conformance harness: every claim a spec makes, checked by machine.

For each spec: it validates; its ``requires`` hold; shipped weights exist and match their
sha256; every variant that fits this machine builds; every hub-loaded role's loading path
works on a tiny checkpoint saved locally with ``save_pretrained`` (same builder, no network);
each sampler/recipe honours the contract (seeded determinism, batch independence where
declared, parameter validation); each listed invariant is registered and passes under
Hypothesis; each cheap ``reproduced`` metric with a ``check`` is re-measured within tolerance.

Used by ``zoo check``, by ``tests/test_conformance.py`` and by the pytest plugin
(``pytest --zoo my-spec.yaml``), so third parties run exactly the same suite.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import Entry
from .errors import ParamError, ZooError
from .metrics_store import record_key
from .spec import HubFile, HubSource, Spec, TimmSource, ZooSource


class Skipped(Exception):
    """A check that cannot run here; reported as SKIP with its reason, never as a pass."""


@dataclass
class Check:
    spec: str
    id: str
    fn: Callable[[], None]
    slow: bool = False


# ----------------------------------------------------------------------------- hypothesis
def load_hypothesis_profile(slow: bool = False) -> None:
    from hypothesis import HealthCheck, settings

    common = dict(deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    settings.register_profile("ci", max_examples=20, derandomize=True, **common)
    settings.register_profile("nightly", max_examples=400, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "nightly" if slow else "ci"))


# ----------------------------------------------------------------------------- comparisons
def assert_same(a: Any, b: Any, *, exact: bool = True, path: str = "result") -> None:
    """Recursive equality for results: bitwise when ``exact``, else allclose(1e-5, 1e-6)."""
    import numpy as np

    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: tensor vs {type(b).__name__}"
        assert a.shape == b.shape, f"{path}: shapes {tuple(a.shape)} vs {tuple(b.shape)}"
        assert a.dtype == b.dtype, f"{path}: dtypes {a.dtype} vs {b.dtype}"
        if exact or not a.is_floating_point():
            assert torch.equal(a, b), f"{path}: tensors differ (max |diff| {(a.double() - b.double()).abs().max().item():.3g})"
        else:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"{path}: max |diff| {(a - b).abs().max().item():.3g}"
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, f"{path}: array shape/type differs"
        ok = np.array_equal(a, b, equal_nan=True) if exact or a.dtype.kind not in "fc" else np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        assert ok, f"{path}: arrays differ"
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_same(a[k], b[k], exact=exact, path=f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: sequences differ in type or length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, exact=exact, path=f"{path}[{i}]")
        return
    if isinstance(a, float) and not exact:
        assert abs(a - b) <= 1e-6 + 1e-5 * abs(b), f"{path}: {a} vs {b}"
        return
    if hasattr(a, "__dataclass_fields__") or (hasattr(a, "__dict__") and not callable(a) and type(a).__module__ != "builtins"):
        assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
        assert_same(vars(a), vars(b), exact=exact, path=path)
        return
    assert a == b, f"{path}: {a!r} != {b!r}"


# ----------------------------------------------------------------------------- helpers
#: check id -> (spec, metric, value, spec file, device) of the last metric re-measurement
measured: dict[str, tuple[Spec, Any, float, str, str]] = {}
_pipelines: dict[tuple[str, str, str, str | None], Any] = {}


@dataclass(frozen=True)
class Target:
    """Where the CPU variants run during a check: ``cpu`` here, ``cuda`` (and bf16) on a GPU box."""

    device: str = "cpu"
    dtype: str | None = None


def _pipeline(entry: Entry, variant: str, target: Target = Target()) -> Any:
    from .build import build_pipeline

    key = (str(entry.path), variant, target.device, target.dtype)
    if key not in _pipelines:
        assert entry.spec is not None
        _pipelines[key] = build_pipeline(entry.spec, file=entry.path, variant=variant, device=target.device, dtype=target.dtype)
    return _pipelines[key]


def cpu_variants(spec: Spec) -> list[str]:
    return [v for v in spec.variants if spec.hardware[v].accelerator in ("cpu", "any")]


def runnable_cpu_variants(spec: Spec) -> list[str]:
    return [v for v in cpu_variants(spec) if spec.hardware[v].status == "runnable"]


def _procedure_variant(spec: Spec, pname: str) -> tuple[str | None, str]:
    """The first runnable CPU variant with every role ``pname`` declares, or ``(None, why)``."""
    from .build import missing_roles

    runnable = runnable_cpu_variants(spec)
    for v in runnable:
        if not missing_roles(spec, pname, v, {r: None for r in spec.roles_of(v)}):
            return v, ""
    if not runnable:
        return None, "no runnable CPU variant"
    return None, f"no runnable CPU variant has the roles {pname} needs ({', '.join(spec.procedure(pname)[1].roles or [])})"


def snapshot_models(models: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Copies of every built role's tensors (``state_dict``), to detect in-place changes."""
    out: dict[str, dict[str, Any]] = {}
    for role, obj in models.items():
        state = getattr(obj, "state_dict", None)
        if callable(state):
            try:
                out[role] = {k: v.detach().clone() for k, v in state().items() if hasattr(v, "detach")}
            except TypeError:  # a state_dict() that needs arguments: not a torch module
                continue
    return out


def assert_models_unchanged(before: dict[str, dict[str, Any]], models: dict[str, Any], what: str) -> None:
    """The cached roles are bit-identical to ``before`` (a procedure trained them in place otherwise)."""
    import torch

    after = snapshot_models(models)
    for role, state in before.items():
        for k, v in state.items():
            w = after.get(role, {}).get(k)
            if w is None or w.shape != v.shape or w.dtype != v.dtype or not torch.equal(w, v):
                raise AssertionError(
                    f"{what} changed the cached weights of role {role!r} ({k}) in place; every later pipeline of "
                    f"the process would see them: set mutates_models = True or use registry.contract.private_copies"
                )


def _tiny_checkpoint(source: HubSource | TimmSource, workdir: Path) -> Any:
    """Save a tiny model of the same type locally and return the source pointing at it."""
    if isinstance(source, TimmSource):
        import timm
        from safetensors.torch import save_file

        from .build import sha256_file

        model = timm.create_model(source.model_name, pretrained=False, **source.kwargs)
        path = workdir / "tiny.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
        return source.model_copy(update={"weights": str(path), "sha256": sha256_file(path)})
    if source.tiny is None:
        raise AssertionError(
            f"{source.id}: no `tiny:` block, so the loading path cannot be tested offline; add tiny.config"
        )
    from .resolve import library_class

    from .spec import refuse_code_keys

    cfg = dict(refuse_code_keys(dict(source.tiny.config)))  # again here: the harness never writes code keys
    target = workdir / "tiny"
    save_dir = target / source.subfolder if source.subfolder else target
    from .build import _is_model_class

    cls = library_class(source.source, source.tiny.model_class or source.model_class)
    if not _is_model_class(cls):  # a tokenizer, processor, feature extractor or scheduler
        _tiny_preprocessor(source.source, cls, cfg).save_pretrained(str(save_dir))
        return source.model_copy(update={"id": str(target), "revision": None, "allow_unpinned": True})
    if source.source == "transformers":
        import transformers

        model_type = cfg.pop("model_type", None)
        if model_type is None:
            raise AssertionError(f"{source.id}: tiny.config needs model_type")
        config = transformers.AutoConfig.for_model(model_type, **cfg)
        cls = library_class("transformers", source.tiny.model_class or source.model_class)
        make = (lambda: cls.from_config(config)) if hasattr(cls, "from_config") else (lambda: cls(config))
    else:
        cls = library_class("diffusers", source.tiny.model_class or source.model_class)
        make = (lambda: cls.from_config(cfg)) if hasattr(cls, "from_config") else (lambda: cls(**cfg))
    _check_tiny_size(make)
    model = make()
    model.save_pretrained(str(save_dir))
    update: dict[str, Any] = {"id": str(target), "revision": None, "allow_unpinned": True}
    if source.adapters:
        update["adapters"] = _tiny_adapters(model, source, workdir)
    return source.model_copy(update=update)


def _check_tiny_size(make: Callable[[], Any]) -> None:
    """Count the parameters of the tiny model ``make()`` builds on the meta device (nothing allocated) and
    refuse it over :data:`registry.limits.TINY_PARAMS`: each ``tiny.config`` integer is capped, their product
    is capped here. A class that cannot be built on the meta device is left to its capped integers."""
    import torch

    from .errors import Location
    from .limits import TINY_PARAMS, SizeError

    try:
        with torch.device("meta"):
            model = make()
    except Exception:  # noqa: BLE001 - the real build reports its own error
        return
    n = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
    try:
        TINY_PARAMS.check(n, "tiny.config", " parameters")
    except SizeError as exc:
        raise ParamError(exc.detail, Location(None, None, None, exc.path)) from None


def _tiny_adapters(model: Any, source: HubSource, workdir: Path) -> list[Any]:
    """A random LoRA per declared adapter (peft's default target modules for a transformers model type;
    every linear layer of a diffusers model, which has no model type peft knows), saved locally under
    the declared file name; the adapters then load through the same call."""
    import peft

    from .weights import sha256_file

    targets = "all-linear" if source.source == "diffusers" else None
    out = []
    for i, adapter in enumerate(source.adapters):
        folder = workdir / f"adapter-{i}"
        lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=targets, init_lora_weights=False))
        lora.save_pretrained(str(folder))
        model = lora.unload()
        saved = folder / "adapter_model.safetensors"
        if adapter.weight_name != saved.name:
            saved = saved.rename(folder / adapter.weight_name)
        out.append(adapter.model_copy(update={"hub": None, "revision": None, "path": str(folder), "sha256": sha256_file(saved)}))
    return out


def tiny_tokenizer(vocab: list[str] | None = None, **special: str) -> Any:
    """A small word-level fast tokenizer built with the ``tokenizers`` package (no files, no network)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = {"unk_token": "[UNK]", "pad_token": "[PAD]", **special}
    words = list(dict.fromkeys([*specials.values(), *(vocab or ["the", "a", "model", "zoo", "token"])]))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=specials["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **specials)


def _tiny_preprocessor(library: str, cls: type, cfg: dict[str, Any]) -> Any:
    """A tiny tokenizer / processor / scheduler of the declared class, from ``tiny.config``
    (tokenizers: ``vocab`` and special tokens; others: the class's keyword arguments)."""
    name = cls.__name__
    if "Tokenizer" in name:
        return tiny_tokenizer(cfg.pop("vocab", None), **cfg)  # saved as tokenizer.json, which every fast class reads
    if name.startswith("Auto"):
        raise AssertionError(f"tiny.model_class: name the concrete class {name} should load (e.g. ViTImageProcessor)")
    return cls(**cfg)


# ----------------------------------------------------------------------------- checks
def checks_for(entry: Entry, slow: bool = False, target: Target = Target(), allow_remote_code_stub: bool = False) -> list[Check]:
    """All conformance checks of one spec file (cheap to create; work happens when run).

    ``allow_remote_code_stub`` is the caller's consent to load a ``trust_remote_code`` role's
    tiny, code-free checkpoint with ``trust_remote_code=True``; without it that check is SKIP.
    The spec's own ``trust_remote_code`` is never taken as consent."""
    name = entry.name
    if entry.spec is None:
        err = entry.error

        def broken() -> None:
            raise AssertionError(str(err))

        return [Check(name, f"{name}::validates", broken)]
    spec = entry.spec
    file = str(entry.path)
    from .requirements import unmet

    # an optional package that is not installed: every check that needs it is SKIP with the pip command
    missing = "; ".join(u.reason() for u in unmet(spec))

    def validates() -> None:
        from .lint import lint

        problems = lint(spec, file, resolve=not missing)  # never import code whose requirements are missing
        assert not problems, "; ".join(str(p) for p in problems)

    checks: list[Check] = [Check(name, f"{name}::validates", validates)]

    def requires() -> None:
        from .build import check_requires

        if missing:
            raise Skipped(missing)
        check_requires(spec, file)

    checks.append(Check(name, f"{name}::requires", requires))

    # shipped weights: present and matching, for every variant
    for role, model in spec.models.items():
        for v, src in model.variants.items():
            if isinstance(src, (ZooSource, TimmSource)) and isinstance(src.weights, str):

                def weights(src: Any = src, role: str = role, v: str = v) -> None:
                    from .build import local_path, sha256_file
                    from .loader import locate, source_dir

                    field = f"models.{role}.variants.{v}.weights"  # inside the folder of the file that names it, or no hash
                    path = local_path(src.weights, source_dir(file, role, v, entry.path.parent), locate(file, field), None, "weights")
                    assert path.is_file(), f"{path} is missing"
                    actual = sha256_file(path)
                    assert actual == src.sha256, f"{path.name}: sha256 {actual} != spec {src.sha256}"

                checks.append(Check(name, f"{name}::weights[{role}.{v}]", weights))

    # every CPU variant builds (a non-runnable one is SKIP with its status, never PASS)
    cpu = cpu_variants(spec)
    for v in cpu:

        def builds(v: str = v) -> None:
            refusal = spec.hardware[v].refusal(v)
            if refusal:
                raise Skipped(refusal)
            _pipeline(entry, v, target)

        checks.append(Check(name, f"{name}::builds[{v}]", builds))

    # hub-loaded roles (usually the paper's `full` checkpoints): loading path on a tiny local copy
    for role, model in spec.models.items():
        for v, src in model.variants.items():
            if isinstance(src, HubSource) or (isinstance(src, TimmSource) and src.weights is None):

                def loading_path(src: Any = src, role: str = role, v: str = v) -> None:
                    from .build import build_model
                    from .loader import locate

                    if isinstance(src, HubSource) and src.tiny is None and spec.hardware[v].status == "declared-only":
                        raise Skipped(str(spec.hardware[v].refusal(v)) + "; no tiny: block to test its loading path")
                    # The harness never consents on the spec's behalf: a remote-code role is built
                    # (from a code-free tiny checkpoint, the "stub") only if the caller said so.
                    needs_code = bool(getattr(src, "trust_remote_code", False))
                    if needs_code and not allow_remote_code_stub:
                        raise Skipped("needs remote code; checked on a code-free stub only with "
                                      "`zoo check --allow-remote-code-stub` (the caller's consent)")
                    with tempfile.TemporaryDirectory() as tmp:
                        tiny = _tiny_checkpoint(src, Path(tmp))
                        obj = build_model(tiny, spec_dir=entry.path.parent, device="cpu",
                                          trust_remote_code=needs_code and allow_remote_code_stub,
                                          loc=locate(file, f"models.{role}.variants.{v}"), allow_outside_paths=True)
                        assert obj is not None
                        if hasattr(obj, "parameters"):
                            assert sum(p.numel() for p in obj.parameters()) > 0, "loaded model has no parameters"

                checks.append(Check(name, f"{name}::loading-path[{role}.{v}]", loading_path))
            elif isinstance(src, ZooSource) and isinstance(src.weights, HubFile):

                def hub_file_path(src: ZooSource = src, role: str = role, v: str = v) -> None:
                    field = f"models.{role}.variants.{v}"
                    if src.tiny_config is None and spec.hardware[v].status == "declared-only":
                        # a declared-only role may be paper-sized (building it here would cost minutes)
                        raise Skipped(
                            f"{spec.hardware[v].refusal(v)}; its hub-file loading path is not built at the paper's size: add "
                            f"`tiny_config: {{...}}` to {field} (factory config overrides, merged over `config`, that give a "
                            f"tiny model with the same keys and converter, e.g. fewer layers, a smaller width) to check it offline")
                    _check_hub_file_loading_path(entry, src, field)

                checks.append(Check(name, f"{name}::loading-path[{role}.{v}]", hub_file_path))

    # sampler / recipe contract, on the first runnable CPU variant that has the procedure's roles
    # (each check binds its own `procedure` as a default argument: a closure would see the last loop iteration's)
    if cpu:
        for pname in [*spec.samplers, *spec.recipes]:
            section = "samplers" if pname in spec.samplers else "recipes"
            v0, no_variant = _procedure_variant(spec, pname)

            def procedure(pname: str = pname, v0: str | None = v0, why: str = no_variant) -> tuple[Any, Any]:
                if v0 is None:
                    raise Skipped(why)
                pipe = _pipeline(entry, v0, target)
                return pipe, pipe.samplers[pname]

            def determinism(pname: str = pname, procedure: Any = procedure) -> None:
                pipe, proc = procedure(pname)
                before = snapshot_models(pipe.models)
                inputs = proc.example_inputs(2)
                first = proc(seed=1234, **inputs)
                second = proc(seed=1234, **inputs)
                assert_models_unchanged(before, pipe.models, f"{pname}")
                assert_same(first, second)

            def params(pname: str = pname, section: str = section, v0: str | None = v0, procedure: Any = procedure) -> None:
                from .build import make_procedure

                pipe, _ = procedure(pname)
                try:
                    make_procedure(spec, pname, pipe.models, target.device, target.dtype, {"__not_a_parameter__": 1}, file, v0)
                except ParamError as exc:
                    assert "unknown parameter" in str(exc), str(exc)
                else:
                    raise AssertionError(f"{pname}: unknown parameter was accepted")
                cls = type(pipe.samplers[pname])
                typed = [f for f, info in cls.Params.model_fields.items() if info.annotation not in (Any, object)]
                if typed:
                    try:
                        make_procedure(spec, pname, pipe.models, target.device, target.dtype, {typed[0]: object()}, file, v0)
                    except ParamError as exc:
                        assert typed[0] in str(exc), f"error does not name the parameter: {exc}"
                    else:
                        raise AssertionError(f"{pname}: parameter {typed[0]} accepted an arbitrary object")

            checks.append(Check(name, f"{name}::{section}[{pname}]::seeded-determinism", determinism))
            checks.append(Check(name, f"{name}::{section}[{pname}]::param-validation", params))

            def batch(pname: str = pname, procedure: Any = procedure) -> None:
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

            if section == "samplers" or (not missing and _declares_batch_independence(spec.procedure(pname)[1].target)):
                checks.append(Check(name, f"{name}::{section}[{pname}]::batch-independence", batch))

            def population(pname: str = pname, procedure: Any = procedure) -> None:
                _check_population(*procedure(pname), pname, exact=target.device == "cpu")

            declared = _declares_population(spec.procedure(pname)[1].target) if section == "samplers" else None
            if declared is not None:
                checks.append(Check(name, f"{name}::{section}[{pname}]::{declared}", population))

            produced = spec.procedure(pname)[1].produces
            if produced is not None:

                def produces(pname: str = pname, role: str = produced, procedure: Any = procedure) -> None:
                    pipe, proc = procedure(pname)
                    _check_produces(entry, pipe, proc, pname, role)

                checks.append(Check(name, f"{name}::{section}[{pname}]::produces[{produced}]", produces))

    # invariants
    for inv in spec.invariants:

        def invariant_check(inv: str = inv) -> None:
            from .contract import registered_invariants
            from .resolve import allowed_packages

            impl = spec.implementation
            if impl.split(".")[0] not in allowed_packages():
                raise AssertionError(f"implementation {impl!r} is not in the allowlist")
            module = f"{impl}.invariants" if _has_submodule(impl, "invariants") else impl
            importlib.import_module(module)
            found = registered_invariants(impl)
            if inv not in found:
                raise AssertionError(f"invariant {inv!r} is not registered by {impl} (registered: {', '.join(sorted(found)) or 'none'})")
            found[inv]()

        checks.append(Check(name, f"{name}::invariant[{inv}]", invariant_check))

    # reproduced metrics
    for m in spec.metrics:
        if m.kind != "reproduced":
            continue
        mid = f"{name}::metric[{record_key(m)}]"  # the setting tells apart same-named metrics

        def metric(m: Any = m, mid: str = mid) -> None:
            from .resolve import resolve

            if m.check is None:
                raise Skipped(f"no check: function; reproduce with `{m.command}`")
            if m.slow and not slow:
                raise Skipped(f"slow; run `zoo check --slow {name}` or `{m.command}`")
            if m.variant not in cpu:
                raise Skipped(f"variant {m.variant} does not run on cpu")
            refusal = spec.hardware[m.variant].refusal(m.variant)
            if refusal:
                raise Skipped(refusal)
            resolve(m.check, kind="metric_check")
            value = float(_pipeline(entry, m.variant, target).evaluate(m.check, **m.check_params))
            measured[mid] = (spec, m, value, str(entry.path), target.device)
            assert abs(value - m.value) <= m.tolerance, (
                f"{m.name}: measured {value:.6g}, spec says {m.value:g} ± {m.tolerance:g}"
            )

        checks.append(Check(name, mid, metric, slow=m.slow))
    if missing:
        for check in checks[2:]:  # all but validates and requires

            def skip(why: str = missing) -> None:
                raise Skipped(why)

            check.fn = skip
    return checks


def _check_hub_file_loading_path(entry: Entry, src: ZooSource, field: str) -> None:
    """A hub-file role's loading path, offline: the factory's random state dict (at ``config``, or at
    ``tiny_config`` merged over it when the role has one), mapped back by the converter's inverse
    (identity without a converter), saved under the same file name in a temp folder, then read,
    verified, converted and loaded by the same code as the real file.

    Every floating-point parameter is first moved off its init by seeded noise, so tensors the factory
    initialises identically (norm scales of ones, zero biases) are told apart: an inverse that swaps
    two of them fails. Every tensor must come back as saved, or, for one the converter fills itself
    (a release without it: new heads, norms), equal to the factory's own init."""
    import torch

    from .build import build_model, call_factory
    from .loader import locate
    from .weights import inverse_converter, save_state, sha256_file

    assert isinstance(src.weights, HubFile)
    file = str(entry.path)
    sub = lambda name: locate(file, f"{field}.{name}")  # noqa: E731
    reference = call_factory(src.factory, src.config, sub, src.tiny_config)
    init = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in reference.parameters():  # unique parameters: tied ones stay tied
            if param.is_floating_point():
                param.add_(torch.randn(param.shape, generator=gen, dtype=torch.float32).to(param.device, param.dtype))
    state = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    raw = inverse_converter(src.convert, sub("convert"))(state)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / src.weights.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        save_state(raw, path)
        # dtype: None: the round trip checks the converter and key layout; a role's storage dtype
        # (bf16) would round the seeded noise and hide nothing about the layout
        local = src.model_copy(update={"weights": src.weights.model_copy(update={"sha256": sha256_file(path)}),
                                       "config": src.tiny_factory_config(), "tiny_config": None, "dtype": None})
        built = build_model(local, spec_dir=entry.path.parent, device="cpu", loc=locate(file, field),
                            hub_file_at=path)  # the harness's own temp file, read as the hub file would be
    got = built.state_dict()

    def same(a: Any, b: Any) -> bool:
        return a.shape == b.shape and bool((a.to(b.dtype) == b).all())

    for k, v in state.items():
        if k not in got or not (same(got[k], v) or same(got[k], init[k])):
            raise AssertionError(f"{field}: {k} does not survive the save -> convert -> load round trip")


def _check_produces(entry: Entry, pipe: Any, proc: Any, pname: str, role: str) -> None:
    """A training recipe's output reloads into ``role``'s factory with ``strict=True``: run it on its
    example inputs (a tiny budget), save what it returns as safetensors, load it back."""
    from .build import build_model
    from .loader import locate
    from .weights import save_state, sha256_file

    src = spec_source(entry, role, pipe.variant)
    if not isinstance(src, ZooSource):
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
        local = src.model_copy(update={"weights": str(path), "sha256": sha256_file(path), "convert": None})
        build_model(local, spec_dir=entry.path.parent, device="cpu", loc=locate(str(entry.path), f"recipes.{pname}.produces"),
                    allow_outside_paths=True)  # the harness's own temp file


def spec_source(entry: Entry, role: str, variant: str) -> Any:
    assert entry.spec is not None
    return entry.spec.models[role].variants.get(variant)


def _declares_population(target: str) -> str | None:
    """The check a sampler's class gets for ``zoo sample``: ``per-row-seeds`` (it sets ``per_row_seeds``),
    ``population`` (it is batch-independent and defines ``population_inputs`` only), or ``None``."""
    from .contract import Procedure
    from .resolve import resolve

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
    from .contract import row_seed
    from .sampling import row_of, split_rows

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
    from .resolve import resolve

    try:
        return bool(getattr(resolve(target, kind="procedure"), "batch_independent", False))
    except ZooError:
        return True


def _has_submodule(package: str, sub: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.{sub}") is not None
    except ModuleNotFoundError:
        return False


def _failure_line(exc: BaseException) -> str:
    """One line for one exception: the assertion message, or ``Type: message (file:line)`` for a crash."""
    if isinstance(exc, (AssertionError, ZooError)):
        return " ".join(str(exc).split()) or type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}{where}"


def _notes(exc: BaseException, indent: str) -> list[str]:
    """Hypothesis' notes (falsifying example, explanation, ``@reproduce_failure`` blob), indented."""
    lines: list[str] = []
    for note in getattr(exc, "__notes__", None) or []:
        lines += [indent + ln for ln in str(note).strip("\n").splitlines() if ln.strip()]
    return lines


def format_failure(exc: BaseException, debug: bool = False) -> str:
    """A failed check's message: the assertion message on the first line, then each failing example
    Hypothesis found (an ``ExceptionGroup`` holds one per distinct failure) with its notes; with
    ``debug`` the full traceback follows."""
    if isinstance(exc, BaseExceptionGroup):
        subs: list[BaseException] = []

        def flatten(group: BaseExceptionGroup) -> None:  # type: ignore[type-arg]
            for sub in group.exceptions:
                flatten(sub) if isinstance(sub, BaseExceptionGroup) else subs.append(sub)

        flatten(exc)
        lines = [f"{len(subs)} distinct failures: " + "; ".join(_failure_line(e) for e in subs)]
        for i, sub in enumerate(subs, 1):
            lines += [f"    [{i}] {_failure_line(sub)}", *_notes(sub, "        ")]
        lines += _notes(exc, "    ")
    else:
        lines = [_failure_line(exc), *_notes(exc, "    ")]
    if debug:  # the traceback repeats the notes (falsifying examples, blob) under each exception
        lines = lines[:1] + ["    " + ln for ln in "".join(traceback.format_exception(exc)).rstrip().splitlines() if ln.strip()]
    return "\n".join(lines)


def run_check(check: Check, debug: bool = False) -> tuple[str, str, float]:
    """``(status, message, seconds)`` with status PASS / FAIL / SKIP; a failure's message is
    :func:`format_failure` (first line a summary, then falsifying examples; traceback if ``debug``).
    Seconds are wall-clock; the CPU seconds of the last call are in :data:`LAST_CPU`."""
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        check.fn()
    except Skipped as exc:
        return "SKIP", str(exc), _elapsed(t0, c0)
    except Exception as exc:  # noqa: BLE001 - report any crash as a failure with its origin
        return "FAIL", format_failure(exc, debug), _elapsed(t0, c0)
    return "PASS", "", _elapsed(t0, c0)


LAST_CPU = 0.0
DEFAULT_BUDGET_S = 20.0


def _elapsed(t0: float, c0: float) -> float:
    global LAST_CPU
    LAST_CPU = time.process_time() - c0
    return time.perf_counter() - t0


def budget_seconds(value: float | None = None) -> float:
    """The per-spec budget for the default (non-slow) checks: ``value``, else ``$ZOO_CHECK_BUDGET``,
    else 20 s. Measured in CPU seconds of the checking process, so a loaded machine does not fail a
    spec that an idle CI runner (where CPU and wall time agree at one thread) would pass."""
    if value is not None:
        return float(value)
    raw = os.environ.get("ZOO_CHECK_BUDGET", "")
    try:
        return float(raw) if raw else DEFAULT_BUDGET_S
    except ValueError:
        raise ZooError(f"ZOO_CHECK_BUDGET: expected seconds, got {raw!r}") from None




def run_checks(
    entries: Iterable[Entry], *, slow: bool = False, only: str | None = None, verbose: bool = True, target: Target = Target(),
    debug: bool = False, record: bool = False, allow_remote_code_stub: bool = False, budget: float | None = None,
    results: list[dict[str, Any]] | None = None,
) -> bool:
    """Run every check of ``entries``; print ``[k/N] STATUS id`` per check (failures always, the rest
    when ``verbose``; on a TTY a quiet run shows a progress bar instead), then a per-spec summary (wall
    and CPU seconds, the five slowest checks); True if none failed. ``record`` stores each re-measured
    metric (see :mod:`registry.metrics_store`). With ``budget`` (CPU seconds), a spec whose default
    (non-slow) checks cost more fails. ``results`` (a list) receives one dict per check: id, spec,
    status, message, wall and CPU seconds (``zoo check --json``)."""
    load_hypothesis_profile(slow)
    plan = [c for e in entries for c in checks_for(e, slow=slow, target=target, allow_remote_code_stub=allow_remote_code_stub)
            if not only or only in c.id]
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    per_spec: dict[str, dict[str, float]] = {}
    slowest: dict[str, list[tuple[float, str]]] = {}
    bar = _progress(len(plan), enabled=not verbose)
    width = len(str(len(plan)))
    for k, check in enumerate(plan, 1):
        if bar is not None:
            bar.set_description(check.id[:60], refresh=False)
        status, msg, secs = run_check(check, debug=debug)
        if results is not None:
            results.append({"id": check.id, "spec": check.spec, "status": status, "message": msg,
                            "seconds": round(secs, 3), "cpu_seconds": round(LAST_CPU, 3), "slow": check.slow})
        if check.id in measured:
            _record(check.id, record)
        counts[status] += 1
        row = per_spec.setdefault(check.spec, {"PASS": 0, "FAIL": 0, "SKIP": 0, "seconds": 0.0, "cpu": 0.0, "default_cpu": 0.0})
        row[status] += 1
        row["seconds"] += secs
        row["cpu"] += LAST_CPU
        row["default_cpu"] += 0.0 if check.slow else LAST_CPU
        slowest.setdefault(check.spec, []).append((secs, check.id))
        if bar is not None:
            bar.update(1)
        if verbose or status == "FAIL":
            line = f"[{k:>{width}}/{len(plan)}] {status}  {check.id}  ({secs:.1f}s)" + (f"  {msg}" if msg else "")
            (bar.write(line) if bar is not None else print(line, flush=True))
    if bar is not None:
        bar.close()
    over = [f"{name} ({row['default_cpu']:.1f}s CPU > {budget:g}s)" for name, row in per_spec.items()
            if budget is not None and row["default_cpu"] > budget]
    if len(per_spec) > 1 or verbose:
        name_w = max([len(n) for n in per_spec] + [4])
        print(f"{'spec':<{name_w}}  pass  fail  skip  seconds")
        for name, row in per_spec.items():
            flag = ("  FAILED" if row["FAIL"] else "") + (
                "  OVER BUDGET" if budget is not None and row["default_cpu"] > budget else "")
            print(f"{name:<{name_w}}  {row['PASS']:>4.0f}  {row['FAIL']:>4.0f}  {row['SKIP']:>4.0f}  {row['seconds']:>7.1f}{flag}")
        for name, row in per_spec.items():
            top = ", ".join(f"{cid.split('::', 1)[-1]} {sec:.1f}s" for sec, cid in sorted(slowest[name], reverse=True)[:5])
            print(f"time  {name}: {row['seconds']:.1f}s wall, {row['cpu']:.1f}s CPU; slowest: {top}")
    total_s, total_cpu = sum(r["seconds"] for r in per_spec.values()), sum(r["cpu"] for r in per_spec.values())
    print(f"time  all checks: {total_s:.1f}s wall, {total_cpu:.1f}s CPU")
    if over:
        print(f"FAIL  over the per-spec budget: {', '.join(over)}")
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    sys.stdout.flush()
    return counts["FAIL"] == 0 and not over


def _progress(total: int, enabled: bool) -> Any:
    """A tqdm bar on stderr when it is a terminal (quiet runs), else None."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="check", file=sys.stderr, leave=False, mininterval=0, miniters=1)


def _record(check_id: str, store: bool) -> None:
    spec, metric, value, file, device = measured.pop(check_id)
    if store:  # the record keeps the value; PASS/FAIL is recomputed from it whenever it is shown
        from . import metrics_store

        try:
            metrics_store.record(spec, metric, value, spec_file=file, device=device)
        except OSError as exc:  # a read-only cache must not fail the check
            print(f"warning: could not store {check_id}: {exc}", file=sys.stderr)
