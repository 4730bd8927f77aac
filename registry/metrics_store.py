"""Paper numbers beside measured ones: the pairing rule and the store of values ``zoo check`` measured.

Pairing rule: a ``reported`` metric (the paper's number) and a ``reproduced`` metric (ours) pair when
they have the same ``name``, the same ``dataset`` and the same ``setting`` mapping (conditions such as
``{nfe: 10}`` live in ``setting:``, not in the metric name). The variant may differ: the paper's
number is usually on the ``full`` checkpoints, ours on a CPU variant.

Store: each time ``zoo check`` re-measures a reproduced metric it writes the value, the date, the
machine and the package versions under ``$ZOO_CACHE_DIR/metrics/`` (default ``~/.cache/zoo/metrics``;
``$ZOO_METRICS_DIR`` overrides). The store is untrusted input on read:

* records are keyed by the spec file's identity, its real path and the sha256 of the resolved spec
  (:func:`spec_identity`), so a third-party spec that reuses a name, or an edited spec, never shows
  its measurements beside another spec's paper numbers;
* one file per record (``<spec>-<identity>/<record>.json``), written to a unique temp name and
  renamed, so concurrent writers lose nothing and a reader never sees half a record (the last
  measurement of a metric wins);
* PASS / FAIL is recomputed from the stored value and the spec's current value and tolerance, never
  read from the record;
* a malformed record (not JSON, wrong fields, a value that is not a finite number, another identity)
  is skipped with one warning line on stderr.

Nothing here imports torch.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .spec import Metric, Spec

VERSIONED = ("zoo-icml2026", "torch", "diffusers", "transformers", "hypothesis", "pydantic")


def store_dir() -> Path:
    """``$ZOO_METRICS_DIR``, else ``$ZOO_CACHE_DIR/metrics`` (or ``~/.cache/zoo/metrics``); not created here."""
    if os.environ.get("ZOO_METRICS_DIR"):
        return Path(os.environ["ZOO_METRICS_DIR"])
    root = Path(os.environ.get("ZOO_CACHE_DIR") or Path.home() / ".cache" / "zoo")
    return root / "metrics"


def setting_key(setting: dict[str, Any]) -> str:
    """Canonical text of a setting mapping (key order does not matter)."""
    return json.dumps(setting, sort_keys=True, separators=(",", ":"), default=str)


def pair_key(m: Metric) -> tuple[str, str, str]:
    """What pairs a reported number with its reproduced counterpart: name, dataset, setting."""
    return (m.name, m.dataset, setting_key(m.setting))


def record_key(m: Metric) -> str:
    """A measured value's key in the store and its check id: ``name@dataset/variant[,key=value...]``."""
    return f"{m.name}@{m.dataset}/{m.variant}" + "".join(f",{k}={v}" for k, v in sorted(m.setting.items()))


def environment(device: str = "cpu") -> dict[str, Any]:
    """Date (UTC), machine and package versions of a measurement."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str] = {"python": platform.python_version()}
    for pkg in VERSIONED:
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"host": platform.node(), "platform": platform.platform(), "arch": platform.machine(),
                    "cpus": os.cpu_count(), "device": device},
        "versions": versions,
    }


MAX_RECORD_BYTES = 1 << 20


def spec_identity(spec: Spec, spec_file: str | os.PathLike[str]) -> dict[str, str]:
    """What a record belongs to: the spec file's real path and the sha256 of the resolved (validated,
    ``extends`` applied) spec."""
    from .sampling import spec_sha256  # the engine's one definition (zoo sample's run identity uses it too)

    return {"spec_file": os.path.realpath(spec_file), "spec_sha256": spec_sha256(spec)}


def _folder(spec: Spec, identity: dict[str, str]) -> Path:
    import hashlib

    digest = hashlib.sha256(f"{identity['spec_file']}\0{identity['spec_sha256']}".encode()).hexdigest()[:20]
    return store_dir() / f"{spec.name}-{digest}"


def _record_file(folder: Path, key: str) -> Path:
    import hashlib

    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def status(metric: Metric, value: float) -> str:
    """PASS when ``value`` is within the metric's tolerance of its spec value, else FAIL."""
    return "PASS" if metric.tolerance is not None and abs(value - metric.value) <= metric.tolerance else "FAIL"


def _warn(message: str) -> None:
    import sys

    print(f"warning: {' '.join(message.split())[:300]}", file=sys.stderr)


def _valid(rec: Any, identity: dict[str, str]) -> str | None:
    """Why a stored record cannot be used (None: it can)."""
    import math

    if not isinstance(rec, dict):
        return f"a {type(rec).__name__}, not a record"
    value = rec.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"value {str(value)[:40]!r} is not a finite number"
    for key in ("key", "date"):
        if not isinstance(rec.get(key), str):
            return f"{key} missing or not a string"
    for key in ("machine", "versions"):
        if not isinstance(rec.get(key), dict):
            return f"{key} missing or not a mapping"
    if rec.get("spec_file") != identity["spec_file"] or rec.get("spec_sha256") != identity["spec_sha256"]:
        return "it belongs to another spec file or another version of the spec"
    return None


def load(spec: Spec, spec_file: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The stored measurements of this spec file (this resolved spec), by :func:`record_key`; each record as
    stored except ``status``, which is left to :func:`rows` to recompute. Malformed records are skipped with
    one warning line each."""
    from .files import read_spec_bytes
    from .errors import SpecError

    identity = spec_identity(spec, spec_file)
    folder = _folder(spec, identity)
    out: dict[str, dict[str, Any]] = {}
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return out
    for path in files:
        try:
            rec = json.loads(read_spec_bytes(path, limit=MAX_RECORD_BYTES))
        except (SpecError, ValueError, RecursionError) as exc:
            _warn(f"metrics store: skipped malformed record {path} ({type(exc).__name__})")
            continue
        why = _valid(rec, identity)
        if why is None and _record_file(folder, rec["key"]) != path:
            why = "its file name does not match its metric"
        if why is not None:
            _warn(f"metrics store: skipped malformed record {path} ({why})")
            continue
        out[rec["key"]] = {k: v for k, v in rec.items() if k != "status"}
    return out


def record(spec: Spec, metric: Metric, value: float, *, spec_file: str | os.PathLike[str], device: str = "cpu") -> Path:
    """Store the last measured ``value`` of a reproduced ``metric`` of the spec in ``spec_file`` (one file,
    written atomically under a unique temp name; the verdict is not stored: :func:`rows` recomputes it)."""
    import tempfile

    identity = spec_identity(spec, spec_file)
    folder = _folder(spec, identity)
    folder.mkdir(parents=True, exist_ok=True)
    key = record_key(metric)
    rec = {"key": key, "name": metric.name, "dataset": metric.dataset, "variant": metric.variant, "setting": metric.setting,
           "value": float(value), "spec_value": metric.value, "tolerance": metric.tolerance, **identity, **environment(device)}
    path = _record_file(folder, key)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(rec, f, indent=2, sort_keys=True, default=str)
        os.replace(tmp, path)  # atomic: a concurrent reader never sees half a record
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


@dataclass
class Row:
    """One line of ``zoo metrics``: the paper's number(s) and ours for a (name, dataset, setting)."""

    name: str
    dataset: str
    setting: dict[str, Any]
    reported: list[Metric] = field(default_factory=list)
    reproduced: list[Metric] = field(default_factory=list)
    measured: list[dict[str, Any]] = field(default_factory=list)

    @property
    def paired(self) -> bool:
        return bool(self.reported and self.reproduced)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "dataset": self.dataset, "setting": self.setting, "paired": self.paired,
            "paper": [{"value": m.value, "variant": m.variant, "unit": m.unit, "source": m.source} for m in self.reported],
            "reproduced": [{"value": m.value, "tolerance": m.tolerance, "variant": m.variant, "command": m.command,
                            "unit": m.unit} for m in self.reproduced],
            "measured": self.measured,
        }


def rows(spec: Spec, measured: dict[str, dict[str, Any]] | None = None, *, spec_file: str | os.PathLike[str] | None = None) -> list[Row]:
    """Every metric of ``spec`` grouped by the pairing rule, in spec order, with the measurements stored for
    ``spec_file`` (or ``measured``), each with its ``status`` recomputed from value and tolerance."""
    if measured is None:
        measured = load(spec, spec_file) if spec_file is not None else {}
    out: dict[tuple[str, str, str], Row] = {}
    for m in spec.metrics:
        row = out.setdefault(pair_key(m), Row(m.name, m.dataset, dict(m.setting)))
        if m.kind == "reported":
            row.reported.append(m)
        else:
            row.reproduced.append(m)
            if record_key(m) in measured:
                got = measured[record_key(m)]
                row.measured.append({**got, "status": status(m, float(got["value"]))})
    order = {name: i for i, name in enumerate(dict.fromkeys(m.name for m in spec.metrics))}
    # same-named metrics together (the paper's on its datasets, ours on ours), first-appearance order
    return sorted(out.values(), key=lambda r: order[r.name])
