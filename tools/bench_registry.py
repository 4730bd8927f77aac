#!/usr/bin/env python
"""Registry speed: cold ``import zoo``, ``zoo list``, validating 1,000 generated specs, next to
``import timm; timm.list_models()`` in the same run. Prints one table.

Targets (issue #2): ``zoo list`` at least 20x faster than timm's listing; ``import zoo`` pulls no torch.
Each cold measurement is a fresh interpreter (median of --repeats runs). ``zoo list`` rows use
the spec index cache as a user's second call would; the validation row disables it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "specs"


def cold(code: str, repeats: int, env_extra: dict[str, str] | None = None) -> tuple[float, str]:
    """Median wall time of ``python -c code`` (fresh process each time) and its last stdout."""
    env = {**os.environ, **(env_extra or {})}
    times, out = [], ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        times.append(time.perf_counter() - t0)
        out = res.stdout.strip()
    return statistics.median(times), out


def generate_specs(folder: Path, n: int) -> None:
    template = (FIXTURE / "demo-gaussian.yaml").read_text()
    (folder / "demo-affine.safetensors").write_bytes((FIXTURE / "demo-affine.safetensors").read_bytes())
    for i in range(n):
        (folder / f"gen-{i:04d}.yaml").write_text(template.replace("name: demo-gaussian", f"name: gen-{i:04d}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="fresh-process runs per row (median reported)")
    ap.add_argument("--specs", type=int, default=1000, help="number of generated specs to validate")
    args = ap.parse_args()

    rows = []
    t, out = cold("import sys, zoo; print('torch' in sys.modules)", args.repeats)
    rows.append(("import zoo (cold)", t, f"torch imported: {out}"))
    t, out = cold("import zoo; print(len(zoo.list()))", args.repeats)
    zoo_list = t
    rows.append(("import zoo; zoo.list() (cold)", t, f"{out} specs"))
    t, out = cold("from zoo.cli import main; main(['list'])", args.repeats)
    rows.append(("zoo list CLI (cold)", t, f"{len(out.splitlines())} lines"))
    with tempfile.TemporaryDirectory() as tmp:
        generate_specs(Path(tmp), args.specs)
        code = (
            "import sys, time, zoo; t0 = time.perf_counter(); zoo.add_specs(sys.argv[-1]);"
            "n = len(zoo.list('gen-*')); print(n, round(time.perf_counter() - t0, 4))"
        )
        code = code.replace("sys.argv[-1]", repr(tmp))
        t, out = cold(code, args.repeats, {"ZOO_NO_INDEX_CACHE": "1"})
        n, inner = out.split()
        rows.append((f"validate {args.specs} specs (YAML+schema, no index)", t, f"{n} valid; {float(inner)*1e3/int(n):.3f} ms/spec in-process"))
        cache = {"ZOO_CACHE_DIR": os.path.join(tmp, "cache")}
        cold(code, 1, cache)  # fill the index
        t, out = cold(code, args.repeats, cache)
        n, inner = out.split()
        rows.append((f"list {args.specs} specs (warm index)", t, f"{n} listed; {float(inner)*1e3/int(n):.3f} ms/spec in-process"))
    t, out = cold("import timm; print(len(timm.list_models()))", args.repeats)
    timm_list = t
    rows.append(("import timm; timm.list_models() (cold)", t, f"{out} models"))

    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'seconds':>8}  notes")
    print("-" * (width + 40))
    for name, secs, note in rows:
        print(f"{name:<{width}}  {secs:8.3f}  {note}")
    print("-" * (width + 40))
    print(f"zoo.list() vs timm.list_models(): {timm_list / zoo_list:.1f}x faster (target >= 20x)")


if __name__ == "__main__":
    main()
