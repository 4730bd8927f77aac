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
#: check id -> (spec name, metric, value, spec file, device) of the last metric re-measurement
measured: dict[str, tuple[str, Any, float, str, str]] = {}
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

    cfg = dict(source.tiny.config)
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
def checks_for(entry: Entry, slow: bool = False, target: Target = Target()) -> list[Check]:
    """All conformance checks of one spec file (cheap to create; work happens when run)."""
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

        problems = lint(spec, file)
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

                    with tempfile.TemporaryDirectory() as tmp:
                        tiny = _tiny_checkpoint(src, Path(tmp))
                        obj = build_model(tiny, spec_dir=entry.path.parent, device="cpu",
                                          trust_remote_code=getattr(src, "trust_remote_code", False),
                                          loc=locate(file, f"models.{role}.variants.{v}"))
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
        mid = f"{name}::metric[{record_key(m)}]"  # the setting tells apart same-named metrics

        def metric(m: Any = m, mid: str = mid) -> None:
            from .resolve import resolve

            if m.check is None:
                raise Skipped(f"no check: function; reproduce with `{m.command}`")
            if m.slow and not slow:
                raise Skipped(f"slow; run `zoo check --slow {name}` or `{m.command}`")
            if m.variant not in cpu:
                raise Skipped(f"variant {m.variant} does not run on cpu")
            fn = resolve(m.check)
            value = float(fn(_pipeline(entry, m.variant, target), **m.check_params))
            measured[mid] = (spec.name, m, value, str(entry.path), target.device)
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
    :func:`format_failure` (first line a summary, then falsifying examples; traceback if ``debug``)."""
    t0 = time.perf_counter()
    try:
        check.fn()
    except Skipped as exc:
        return "SKIP", str(exc), time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - report any crash as a failure with its origin
        return "FAIL", format_failure(exc, debug), time.perf_counter() - t0
    return "PASS", "", time.perf_counter() - t0


def run_checks(
    entries: Iterable[Entry], *, slow: bool = False, only: str | None = None, verbose: bool = True, target: Target = Target(),
    debug: bool = False, record: bool = False,
) -> bool:
    """Run every check of ``entries``; print ``[k/N] STATUS id`` per check (failures always, the rest
    when ``verbose``; on a TTY a quiet run shows a progress bar instead), then a per-spec summary; True
    if none failed. ``record`` stores each re-measured metric (see :mod:`registry.metrics_store`)."""
    load_hypothesis_profile(slow)
    plan = [c for e in entries for c in checks_for(e, slow=slow, target=target) if not only or only in c.id]
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    per_spec: dict[str, dict[str, float]] = {}
    bar = _progress(len(plan), enabled=not verbose)
    width = len(str(len(plan)))
    for k, check in enumerate(plan, 1):
        if bar is not None:
            bar.set_description(check.id[:60], refresh=False)
        status, msg, secs = run_check(check, debug=debug)
        if check.id in measured:
            _record(check.id, status, record)
        counts[status] += 1
        row = per_spec.setdefault(check.spec, {"PASS": 0, "FAIL": 0, "SKIP": 0, "seconds": 0.0})
        row[status] += 1
        row["seconds"] += secs
        if bar is not None:
            bar.update(1)
        if verbose or status == "FAIL":
            line = f"[{k:>{width}}/{len(plan)}] {status}  {check.id}  ({secs:.1f}s)" + (f"  {msg}" if msg else "")
            (bar.write(line) if bar is not None else print(line, flush=True))
    if bar is not None:
        bar.close()
    if len(per_spec) > 1 or verbose:
        name_w = max([len(n) for n in per_spec] + [4])
        print(f"{'spec':<{name_w}}  pass  fail  skip  seconds")
        for name, row in per_spec.items():
            print(f"{name:<{name_w}}  {row['PASS']:>4.0f}  {row['FAIL']:>4.0f}  {row['SKIP']:>4.0f}  {row['seconds']:>7.1f}"
                  + ("  FAILED" if row["FAIL"] else ""))
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    sys.stdout.flush()
    return counts["FAIL"] == 0


def _progress(total: int, enabled: bool) -> Any:
    """A tqdm bar on stderr when it is a terminal (quiet runs), else None."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="check", file=sys.stderr, leave=False, mininterval=0, miniters=1)


def _record(check_id: str, status: str, store: bool) -> None:
    spec_name, metric, value, file, device = measured.pop(check_id)
    if store:
        from . import metrics_store

        try:
            metrics_store.record(spec_name, metric, value, status, spec_file=file, device=device)
        except OSError as exc:  # a read-only cache must not fail the check
            print(f"warning: could not store {check_id}: {exc}", file=sys.stderr)
