"""Paper numbers beside measured ones: the pairing rule and the store of values ``zoo check`` measured.

Pairing rule: a ``reported`` metric (the paper's number) and a ``reproduced`` metric (ours) pair when
they have the same ``name``, the same ``dataset`` and the same ``setting`` mapping (conditions such as
``{nfe: 10}`` live in ``setting:``, not in the metric name). The variant may differ: the paper's
number is usually on the ``full`` checkpoints, ours on a CPU variant.

Store: each time ``zoo check`` re-measures a reproduced metric it writes the value, the verdict, the
date, the machine and the package versions to ``$ZOO_CACHE_DIR/metrics/<spec>.json`` (default
``~/.cache/zoo/metrics``), one record per metric (the last measurement wins). Nothing here imports
torch.
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


def _path(spec_name: str) -> Path:
    return store_dir() / f"{spec_name}.json"


def load(spec_name: str) -> dict[str, dict[str, Any]]:
    """The stored measurements of a spec, by :func:`record_key` (empty if none or unreadable)."""
    try:
        data = json.loads(_path(spec_name).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(spec_name: str, metric: Metric, value: float, status: str, *, spec_file: str | None = None, device: str = "cpu") -> Path:
    """Store the last measured ``value`` of a reproduced ``metric`` (``status`` PASS / FAIL)."""
    data = load(spec_name)
    data[record_key(metric)] = {
        "name": metric.name, "dataset": metric.dataset, "variant": metric.variant, "setting": metric.setting,
        "value": value, "status": status, "spec_value": metric.value, "tolerance": metric.tolerance,
        "spec_file": spec_file, **environment(device),
    }
    path = _path(spec_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
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


def rows(spec: Spec, measured: dict[str, dict[str, Any]] | None = None) -> list[Row]:
    """Every metric of ``spec`` grouped by the pairing rule, in spec order, with the stored measurements."""
    measured = load(spec.name) if measured is None else measured
    out: dict[tuple[str, str, str], Row] = {}
    for m in spec.metrics:
        row = out.setdefault(pair_key(m), Row(m.name, m.dataset, dict(m.setting)))
        if m.kind == "reported":
            row.reported.append(m)
        else:
            row.reproduced.append(m)
            if record_key(m) in measured:
                row.measured.append(measured[record_key(m)])
    order = {name: i for i, name in enumerate(dict.fromkeys(m.name for m in spec.metrics))}
    # same-named metrics together (the paper's on its datasets, ours on ours), first-appearance order
    return sorted(out.values(), key=lambda r: order[r.name])
