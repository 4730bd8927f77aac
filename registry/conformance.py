"""The conformance harness: every claim a spec makes, checked by machine.

For each spec: it validates; its ``requires`` hold; shipped weights exist and match their
sha256; every variant that fits this machine builds; every hub-loaded role's loading path
works on a tiny checkpoint saved locally with ``save_pretrained`` (same builder, no network);
each sampler/recipe honours the contract (seeded determinism, batch independence where
declared, parameter validation strict about booleans vs numbers, every size it accepts bounded);
each listed invariant is registered and passes under Hypothesis; each cheap ``reproduced``
metric with a ``check`` is re-measured within tolerance.

The checks are registered per family in :mod:`registry.checks`; this module runs them (one line per
failure, a budget table, the metrics store). Used by ``zoo check``, by ``tests/test_conformance.py`` and by the pytest plugin
(``pytest --zoo my-spec.yaml``), so third parties run exactly the same suite.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Iterable
from typing import Any

from .catalog import Entry
from .checks import Check, Skipped, Target, checks_for
from .checks.base import (assert_models_unchanged, assert_same, context_for, cpu_variants, measured,
                          runnable_cpu_variants, snapshot_models)
from .checks.build import _tiny_checkpoint, tiny_tokenizer
from .errors import ZooError

# the checks themselves live in registry.checks (one module per family); these names stay importable from here
__all__ = ["Check", "Skipped", "Target", "assert_models_unchanged", "assert_same", "budget_seconds", "checks_for",
           "context_for", "cpu_variants", "format_failure", "load_hypothesis_profile", "measured", "run_check",
           "run_checks", "runnable_cpu_variants", "snapshot_models", "tiny_tokenizer", "_tiny_checkpoint"]


# ----------------------------------------------------------------------------- hypothesis
def load_hypothesis_profile(slow: bool = False) -> None:
    from hypothesis import HealthCheck, settings

    common = dict(deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    settings.register_profile("ci", max_examples=20, derandomize=True, **common)
    settings.register_profile("nightly", max_examples=400, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "nightly" if slow else "ci"))


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
    status, message, wall and CPU seconds, and for a re-measured metric its ``value`` (``zoo check --json`` /
    ``--measure``)."""
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
                            "seconds": round(secs, 3), "cpu_seconds": round(LAST_CPU, 3), "slow": check.slow,
                            **({"value": measured[check.id][2]} if check.id in measured else {})})
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
