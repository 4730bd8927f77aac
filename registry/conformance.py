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
from .spec import HubSource, Spec, TimmSource, ZooSource


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

    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
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
    if source.source == "transformers":
        import transformers

        model_type = cfg.pop("model_type", None)
        if model_type is None:
            raise AssertionError(f"{source.id}: tiny.config needs model_type")
        config = transformers.AutoConfig.for_model(model_type, **cfg)
        cls = library_class("transformers", source.tiny.model_class or source.model_class)
        model = cls.from_config(config) if hasattr(cls, "from_config") else cls(config)
    else:
        cls = library_class("diffusers", source.tiny.model_class or source.model_class)
        model = cls.from_config(cfg) if hasattr(cls, "from_config") else cls(**cfg)
    target = workdir / "tiny"
    save_dir = target / source.subfolder if source.subfolder else target
    model.save_pretrained(str(save_dir))
    return source.model_copy(update={"id": str(target), "revision": None, "allow_unpinned": True})


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
    def validates() -> None:
        from .lint import lint

        problems = lint(spec, file, resolve=True)
        assert not problems, "; ".join(str(p) for p in problems)

    checks: list[Check] = [Check(name, f"{name}::validates", validates)]

    def requires() -> None:
        from .build import check_requires

        check_requires(spec, file)

    checks.append(Check(name, f"{name}::requires", requires))

    # shipped weights: present and matching, for every variant
    for role, model in spec.models.items():
        for v, src in model.variants.items():
            if isinstance(src, (ZooSource, TimmSource)) and src.weights is not None:

                def weights(src: Any = src) -> None:
                    from .build import sha256_file

                    path = entry.path.parent / src.weights
                    assert path.is_file(), f"{path} is missing"
                    actual = sha256_file(path)
                    assert actual == src.sha256, f"{path.name}: sha256 {actual} != spec {src.sha256}"

                checks.append(Check(name, f"{name}::weights[{role}.{v}]", weights))

    # every CPU variant builds
    cpu = cpu_variants(spec)
    for v in cpu:
        checks.append(Check(name, f"{name}::builds[{v}]", lambda v=v: _pipeline(entry, v, target) and None))

    # hub-loaded roles (usually the paper's `full` checkpoints): loading path on a tiny local copy
    for role, model in spec.models.items():
        for v, src in model.variants.items():
            if isinstance(src, HubSource) or (isinstance(src, TimmSource) and src.weights is None):

                def loading_path(src: Any = src, role: str = role, v: str = v) -> None:
                    from .build import build_model
                    from .loader import locate

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

    # sampler / recipe contract, on the first CPU variant
    if cpu:
        v0 = cpu[0]
        for pname in [*spec.samplers, *spec.recipes]:
            section = "samplers" if pname in spec.samplers else "recipes"

            def determinism(pname: str = pname) -> None:
                proc = _pipeline(entry, v0, target).samplers[pname]
                inputs = proc.example_inputs(2)
                first = proc(seed=1234, **inputs)
                second = proc(seed=1234, **inputs)
                assert_same(first, second)

            def params(pname: str = pname, section: str = section) -> None:
                from .build import make_procedure

                pipe = _pipeline(entry, v0, target)
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

            def batch(pname: str = pname) -> None:
                proc = _pipeline(entry, v0, target).samplers[pname]
                if not getattr(proc, "batch_independent", False):
                    raise Skipped(f"{pname} does not declare batch_independent")
                inputs = proc.example_inputs(3)
                rows = proc.output_rows(proc(seed=7, **inputs))
                singles = proc.input_rows(inputs)
                assert len(rows) == len(singles), f"{len(rows)} output rows for {len(singles)} input rows"
                for i, single in enumerate(singles):
                    alone = proc.output_rows(proc(seed=7, **single))
                    assert len(alone) == 1
                    assert_same(rows[i], alone[0], exact=False, path=f"row {i}")

            if section == "samplers":
                checks.append(Check(name, f"{name}::samplers[{pname}]::batch-independence", batch))

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
        mid = f"{name}::metric[{m.name}@{m.dataset}/{m.variant}]"

        def metric(m: Any = m) -> None:
            from .resolve import resolve

            if m.check is None:
                raise Skipped(f"no check: function; reproduce with `{m.command}`")
            if m.slow and not slow:
                raise Skipped(f"slow; run `zoo check --slow {name}` or `{m.command}`")
            if m.variant not in cpu:
                raise Skipped(f"variant {m.variant} does not run on cpu")
            fn = resolve(m.check, kind="metric_check")
            value = float(fn(_pipeline(entry, m.variant, target), **m.check_params))
            assert abs(value - m.value) <= m.tolerance, (
                f"{m.name}: measured {value:.6g}, spec says {m.value:g} ± {m.tolerance:g}"
            )

        checks.append(Check(name, mid, metric, slow=m.slow))
    return checks


def _has_submodule(package: str, sub: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.{sub}") is not None
    except ModuleNotFoundError:
        return False


def run_check(check: Check) -> tuple[str, str, float]:
    """``(status, message, seconds)`` with status PASS / FAIL / SKIP."""
    t0 = time.perf_counter()
    try:
        check.fn()
    except Skipped as exc:
        return "SKIP", str(exc), time.perf_counter() - t0
    except (AssertionError, ZooError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        return "FAIL", msg, time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - report any crash as a failure with its origin
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "FAIL", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]} ({tb.filename}:{tb.lineno})", time.perf_counter() - t0
    return "PASS", "", time.perf_counter() - t0


def run_checks(
    entries: Iterable[Entry], *, slow: bool = False, only: str | None = None, verbose: bool = True, target: Target = Target(),
    allow_remote_code_stub: bool = False,
) -> bool:
    """Run every check of ``entries``; print one line per check; True if none failed."""
    load_hypothesis_profile(slow)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for entry in entries:
        for check in checks_for(entry, slow=slow, target=target, allow_remote_code_stub=allow_remote_code_stub):
            if only and only not in check.id:
                continue
            status, msg, secs = run_check(check)
            counts[status] += 1
            if verbose or status == "FAIL":
                print(f"{status}  {check.id}  ({secs:.1f}s)" + (f"  {msg}" if msg else ""), flush=True)
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    sys.stdout.flush()
    return counts["FAIL"] == 0
