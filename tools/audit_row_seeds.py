#!/usr/bin/env python
"""Seed audit: a population metric over the rows of ONE call of a batch-independent sampler vs one call per row.

Under the engine's batch-independence contract (row i of a call with ``seed`` = row i alone with ``seed``) the
samplers that take given inputs (prompts, captions, scenes) seed every row with ``seed``, so the rows of one call
share their random stream. This script measures, for base seeds ``--seeds``, a rate over the rows

* as ONE call over all rows (``sampler(rows, seed=s)``: every row seeded ``s``), and
* with independent rows (:func:`zoo.common.rows.independent_rows`: row i its own call, seed ``s * 1_000_003 + i``),

on the two given-input samplers whose outputs have a rule-checked rate: poe-bridge's ``direct-is`` (exact-match
accuracy on the 64 held-out additions) and UniDFlow's ``generate`` (faithfulness and diversity of 16 rows for each
of the 36 captions, stage-2 model), next to the path the shipped checks use (poe-bridge: ``metrics.evaluate``,
one call per problem; UniDFlow: ``evaluate.generation``, every row drawn from one generator stream).

    OMP_NUM_THREADS=1 nice -n 10 python tools/audit_row_seeds.py                      # both, seeds 0 1 2 (~4 min)
    OMP_NUM_THREADS=1 nice -n 10 python tools/audit_row_seeds.py --only poe --seeds 0 1 2 3 4 5 6 7
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import zoo  # noqa: E402
from zoo.common.rows import independent_rows  # noqa: E402


def audit_poe(seeds: list[int]) -> None:
    from zoo.common.toy_text import eval_problems, is_correct
    from zoo.methods.poe_bridge.metrics import evaluate

    pipe = zoo.load("poe-bridge", variant="toy", device="cpu")
    proc = pipe.procedures["direct-is"]
    probs = eval_problems(64, 3)

    def acc(texts: list[str]) -> float:
        return sum(is_correct(ex.prompt, t, 3) for ex, t in zip(probs, texts)) / len(probs)

    for s in seeds:
        one = acc(proc([ex.prompt for ex in probs], seed=s).texts)
        ind = acc(independent_rows(lambda ex, r: proc(ex.prompt, seed=r), probs, s).texts)
        shipped = evaluate(proc, 64, seed0=s)["accuracy"]
        print(f"poe-bridge direct-is accuracy  seed {s}: one call {one:.4f}  independent rows {ind:.4f}  "
              f"metrics.evaluate {shipped:.4f}", flush=True)


def audit_unidflow(seeds: list[int], per_caption: int) -> None:
    from zoo.methods.unidflow import evaluate as E
    from zoo.methods.unidflow.procedures import caption_of_tuple, caption_text
    from zoo.methods.unidflow.world import all_captions, faithful

    pipe = zoo.load("unidflow", variant="toy", device="cpu")
    smp = pipe.procedures["generate"].with_params(model_role="reference")
    caps = [caption_of_tuple(c) for c in all_captions()]
    rows = [k for k in range(len(caps)) for _ in range(per_caption)]
    texts = [caption_text(caps[k]) for k in rows]

    def stats(images: torch.Tensor) -> tuple[float, float]:
        imgs = images.tolist()
        ok = [faithful(caps[k], im) for k, im in zip(rows, imgs)]
        distinct = [len({tuple(im) for r, im, o in zip(rows, imgs, ok) if r == k and o}) for k in range(len(caps))]
        return sum(ok) / len(ok), sum(distinct) / len(distinct)

    for s in seeds:
        f1, d1 = stats(smp(seed=s, captions=texts).images)
        f2, d2 = stats(independent_rows(lambda c, r: smp(seed=r, captions=[c]), texts, s, combine=lambda outs: torch.cat([o.images for o in outs])))
        g = E.generation(pipe.models["reference"], per_caption, seed=s)
        print(f"unidflow generate (stage-2)    seed {s}: one call faithful {f1:.4f} diversity {d1:.2f}  independent rows "
              f"faithful {f2:.4f} diversity {d2:.2f}  evaluate.generation faithful {g['faithfulness']:.4f} "
              f"diversity {g['diversity']:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="base seeds")
    ap.add_argument("--only", choices=["poe", "unidflow"], default=None, help="audit one sampler only")
    ap.add_argument("--per-caption", type=int, default=16, help="UniDFlow rows per caption (36 captions)")
    args = ap.parse_args(argv)
    if any(s < 0 for s in args.seeds) or args.per_caption < 1:
        ap.error("--seeds must be >= 0 and --per-caption >= 1")
    torch.set_num_threads(1)
    if args.only in (None, "poe"):
        audit_poe(args.seeds)
    if args.only in (None, "unidflow"):
        audit_unidflow(args.seeds, args.per_caption)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
