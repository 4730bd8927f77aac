#!/usr/bin/env python
"""``zoo sample`` throughput (issue 42): rows/s with 1 and 2 processes for two methods, the scaling ratio, in one run.

Each cell is a fresh ``python -m zoo sample`` (1 process) or ``torchrun --nproc-per-node 2 -m zoo sample`` (2 gloo
ranks) into a new folder. ``rows/s`` is the generation phase the command reports (rows written by all processes over
the time from the first shard to the last collective: model building and imports excluded); ``wall`` is the whole
command. On 2 cores the ideal ratio is 2x; the 1-minute load average before and after is printed because other
processes on the machine take cores from the ranks. ``same`` says whether the two folders read back bit for bit (same
batch size, so true for every sampler, batched networks included).

    OMP_NUM_THREADS=1 python tools/bench_sample.py                 # f-dpmsolver digits UNet + poe-bridge toy (~2 min)
    OMP_NUM_THREADS=1 python tools/bench_sample.py --quick --json out/bench_sample.json
    python tools/bench_sample.py --device cuda                     # 1 process per GPU (2 when there are 2 GPUs)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.quick_flag import parse_with_quick  # noqa: E402

#: (spec, variant, rows, batch size): an image UNet (batched) and a text sampler (a per-row decoding loop)
DEFAULT = [("f-dpmsolver", "digits", 1024, 64), ("poe-bridge", "toy", 128, 8)]
QUICK = [("f-dpmsolver", "digits", 256, 64), ("poe-bridge", "toy", 32, 8)]
RATE = re.compile(r"(\d+) rows in ([0-9.]+) s = ([0-9.]+) rows/s over (\d+) process")


def run_cell(name: str, variant: str, rows: int, batch: int, procs: int, out: Path, device: str | None) -> dict[str, Any]:
    """One ``zoo sample`` command; its reported generation rate and its wall time."""
    args = ["-m", "zoo", "sample", name, "--variant", variant, "--num-samples", str(rows), "--batch-size", str(batch),
            "--out", str(out), "--no-progress", *(["--device", device] if device else [])]
    launcher = procs > 1 or device is not None  # on a GPU even one process goes through torchrun (the NCCL path)
    cmd = [sys.executable, *(["-m", "torch.distributed.run", "--nproc-per-node", str(procs), "--monitor-interval", "0.2"]
                             if launcher else []), *args]
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    m = RATE.search(res.stderr)
    if res.returncode != 0 or m is None:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {res.returncode}): {res.stderr.strip().splitlines()[-1:] or ''}")
    return {"procs": int(m[4]), "rows": int(m[1]), "seconds": float(m[2]), "rows_per_s": float(m[3]), "wall_s": wall,
            "command": (f"torchrun --nproc-per-node {procs} " if launcher else "python ") + " ".join(args)}


def same(a: Path, b: Path) -> bool:
    import zoo
    from registry.conformance import assert_same

    try:
        x, y = zoo.read_samples(a), zoo.read_samples(b)
        assert_same(dict(vars(x)), dict(vars(y)), exact=True)
    except AssertionError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", action="append", metavar="NAME:VARIANT:ROWS:BATCH",
                    help="a method to time instead of the defaults (repeatable), e.g. poe-bridge:toy:64:8")
    ap.add_argument("--device", help="e.g. cuda: every process on its own GPU (as many processes as GPUs, at most 2)")
    ap.add_argument("--json", metavar="PATH", help="also write every number as JSON")
    args = parse_with_quick(ap, argv, {}, "smaller row counts (~1 min)")
    cells = DEFAULT if not args.quick else QUICK
    if args.spec:
        try:
            cells = [(n, v, int(r), int(b)) for n, v, r, b in (s.split(":") for s in args.spec)]
        except ValueError:
            ap.error("--spec: expected NAME:VARIANT:ROWS:BATCH, e.g. poe-bridge:toy:64:8")
        if any(r < 1 or b < 1 for _, _, r, b in cells):
            ap.error("--spec: ROWS and BATCH are integers >= 1")
    procs = [1, 2]
    if args.device and args.device.startswith("cuda"):
        import torch

        procs = [1, 2] if torch.cuda.device_count() >= 2 else [1]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, variant, rows, batch in cells:
            got = {p: run_cell(name, variant, rows, batch, p, Path(tmp) / f"{name}-{p}", args.device) for p in procs}
            row = {"spec": name, "variant": variant, "rows": rows, "batch_size": batch,
                   **{f"p{p}": got[p] for p in procs}}
            if 2 in got:
                row["scaling"] = got[2]["rows_per_s"] / got[1]["rows_per_s"]
                row["same"] = same(Path(tmp) / f"{name}-1", Path(tmp) / f"{name}-2")
            results.append(row)
    load1 = os.getloadavg()[0]
    header = f"zoo sample throughput ({args.device or 'cpu'}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')}, " \
             f"{os.cpu_count()} cores, load average {load0:.2f} before / {load1:.2f} after)"
    lines = [header, f"{'spec':<12} {'variant':<8} {'rows':>5} {'batch':>5} " +
             " ".join(f"{f'{p} proc rows/s':>15} {'wall s':>7}" for p in procs) + ("  scaling  same" if 2 in procs else "")]
    for r in results:
        cells_txt = " ".join(f"{r[f'p{p}']['rows_per_s']:>15.1f} {r[f'p{p}']['wall_s']:>7.1f}" for p in procs)
        tail = f"  {r['scaling']:>6.2f}x  {'yes' if r['same'] else 'NO'}" if "scaling" in r else ""
        lines.append(f"{r['spec']:<12} {r['variant']:<8} {r['rows']:>5} {r['batch_size']:>5} {cells_txt}{tail}")
    lines.append("rows/s: the generation phase zoo sample reports (imports and model building excluded); wall: the whole "
                 "command; scaling: 2-process rows/s over 1-process rows/s (ideal 2x on 2 idle cores)")
    print("\n".join(lines))
    res = {"device": args.device or "cpu", "cores": os.cpu_count(), "load_before": load0, "load_after": load1,
           "seconds": time.perf_counter() - t0, "results": results}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
