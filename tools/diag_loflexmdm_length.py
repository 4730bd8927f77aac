#!/usr/bin/env python
"""Where a trained FlexMDM toy generator gets the length process wrong (docs/methods/loflexmdm.NOTES.md, "Diagnosis").

Samples ``--samples`` unconditional rows with the plain τ-leaping sampler from a spec variant's shipped weights and
prints (1) the sampled length histogram next to the task's exact law, (2) per t bin and current length k, along
the sampler's own trajectories, ``model/exact (row-steps)``: the remaining insertions implied by the generator's
total insertion rate vs the exact ``E[L - k | k, t]`` (``metrics.insertion_calibration``), (3) the same two on
complete clean data rows near the clean end (t = 0.9 ... 0.999), where the hazard ``1/(1 - t)`` turns any
non-vanishing remainder ``c`` into ``c · ln((1 - t_0)/(1 - t_end))`` spurious insertions. The length process is a
pure birth process, so the length law is right iff model and exact agree wherever trajectories go. Meaningful for
the shared-schedule ``flexmdm`` spec (LoFlexMDM's per-position schedules make the total rate content-dependent).

    OMP_NUM_THREADS=1 nice -n 10 python tools/diag_loflexmdm_length.py                      # flexmdm toy, 128 steps
    OMP_NUM_THREADS=1 nice -n 10 python tools/diag_loflexmdm_length.py --variant toy-brackets
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import zoo  # noqa: E402
from zoo.methods.loflexmdm.oracle import OracleLengthModel  # noqa: E402
from zoo.methods.loflexmdm.metrics import insertion_calibration, length_tv, sample_texts, task_of  # noqa: E402
from zoo.methods.loflexmdm.sampler import SamplerConfig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="flexmdm")
    ap.add_argument("--variant", default="toy")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--t-bins", default="0.5,0.7,0.8,0.9,0.95,1.0", help="t bins (multiples of 0.05) to print")
    ap.add_argument("--weights", type=Path, default=None,
                    help="a safetensors file (e.g. from train_loflexmdm.py --out DIR) loaded into the variant's architecture "
                         "instead of its pinned weights")
    ap.add_argument("--insertion-head", choices=["multiplier", "survival"], default=None,
                    help="with --weights: the insertion head those weights were trained with (default: the spec's)")
    args = ap.parse_args(argv)
    if args.weights is None:
        model = zoo.load(args.spec, variant=args.variant).models["model"]
    else:
        from safetensors.torch import load_file

        from registry.loader import load_spec_file
        from zoo.methods.loflexmdm.model import build_model

        config = dict(load_spec_file(ROOT / "specs" / f"{args.spec}.yaml").models["model"].variants[args.variant].config)
        if args.insertion_head is not None:
            config["insertion_head"] = args.insertion_head
        model = build_model(**config)
        model.load_state_dict(load_file(str(args.weights)))
    task = task_of(model)
    texts, _ = sample_texts(model, args.samples, SamplerConfig(max_steps=args.steps), args.seed)
    hist = collections.Counter(map(len, texts))
    law = task.length_law()
    print(f"{args.spec}[{args.variant}] {args.steps} steps, {args.samples} samples: length TV {length_tv(texts, task):.3f}")
    print("length  sampled  exact")
    for k in sorted(set(hist) | set(law)):
        print(f"{k:6d}  {hist.get(k, 0) / args.samples:7.3f}  {law.get(k, 0.0):5.3f}")
    table = insertion_calibration(model, args.samples, args.steps, args.seed)
    print("t bin: k=model/exact(row-steps) for k with >= 30 row-steps (remaining insertions)")
    for tb in (float(x) for x in args.t_bins.split(",")):
        cells = [f"k={k}:{m:.2f}/{e:.2f}({c})" for (t, k), (m, e, c) in table.items() if abs(t - tb) < 1e-9 and c >= 30]
        print(f"t~{tb:.2f} " + " ".join(cells))
    tok = model.zoo_tokenizer
    oracle = OracleLengthModel(task.length_law(), tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols])
    z1, _, valid = task.encode_latents(task.sample_texts(args.samples, torch.Generator().manual_seed(args.seed)), tok)
    k = valid.sum(1) - 1
    print("complete clean data rows: L=model/exact remaining insertions")
    for t0 in (0.9, 0.97, 0.99, 0.997, 0.999):
        t = torch.full((len(k),), t0)
        with torch.no_grad():
            _, b_in, _ = model.generator_rates(z1, valid, t)
        total, exact = (b_in * valid).sum(1), oracle.expected_remaining(k, t)
        print(f"t={t0:<5} " + " ".join(f"L{L}:{total[k == L].mean():.3f}/{exact[k == L].mean():.3f}" for L in sorted(task.length_law())))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    raise SystemExit(main())
