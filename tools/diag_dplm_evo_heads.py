#!/usr/bin/env python
"""Diagnostic (h) of docs/methods/dplm-evo.md: the loop share of the DPLM-Evo edit heads' probability mass on the
bench's clean evolve starts (``family().train[::len // ROWS][:ROWS]``), next to the Bayes-optimal heads'
(``metrics.head_indel_loop_share`` / ``metrics.bayes_indel_loop_share``; deletion in the loop iff
``LEFT <= k < n − RIGHT``, insertion iff gap ``LEFT <= g <= n − RIGHT``).

    python tools/diag_dplm_evo_heads.py                                   # the shipped toy weights
    python tools/diag_dplm_evo_heads.py --train contextual --gamma-indel 5 --seed 0   # train one (not saved)
    python tools/diag_dplm_evo_heads.py --train contextual --gamma-indel 20 --seed 10 --json out.json
    python tools/diag_dplm_evo_heads.py --weights a.safetensors --weights b.safetensors   # any saved toy networks
    python tools/diag_dplm_evo_heads.py --train contextual --hidden 128 --layers 4 --steps 2500   # a larger toy
    python tools/diag_dplm_evo_heads.py --train contextual --ins-law uniform --seed 10 --evolve-seeds 4

``--train`` trains ``CONFIGS[KERNEL]`` with ``gamma_del = gamma_ins = GAMMA`` (``gamma_sub`` stays 1) exactly as
``tools/train_dplm_evo.py`` does (one thread, ``setup_deterministic(seed)``, same data and draw order), so
``--gamma-indel 1 --seed 0`` is the shipped contextual network; the weights are saved only with ``--save``.
``--hidden / --layers / --heads / --intermediate`` set the ``build_toy`` size (``model.ToyConfig``; unset = the
shipped 64 / 2 / 4 / 128; ``--intermediate`` defaults to twice ``--hidden``, the shipped ratio) for ``--train`` and
for reading ``--weights``. ``--ins-law uniform`` draws inserted residues from a uniform prior in training
(``noise.Knobs.ins_law``). ``--evolve-seeds N`` also runs the spec's ``evolve`` sampler with each network on
``--evolve-rows`` starts (512, the bench's) for sampler seeds ``0 .. N − 1`` and prints the loop-indel rate
(provenance, the spec metric) per seed and pooled over the seeds' net indels; with ``--bayes-placed`` it also
runs each network with its edit mass placed by the family's exact law (``metrics.BayesPlacedEditHeads``), the
control of where ideal heads would put this network's edits in the same sampler (the network's own reference:
its substitution head still decides the noisy set).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.dplm_evo.alphabet import AA  # noqa: E402
from zoo.methods.dplm_evo.family import N_LATENT, family  # noqa: E402
from zoo.methods.dplm_evo.metrics import bayes_indel_loop_share, head_indel_loop_share  # noqa: E402
from zoo.methods.dplm_evo.model import ToyConfig, build_toy  # noqa: E402
from zoo.methods.dplm_evo.training import CONFIGS, train  # noqa: E402

WEIGHTS = ROOT / "specs" / "weights"
KERNELS = ("contextual", "uniform", "blosum62")


def starts_of(rows: int) -> list:
    """The bench's clean evolve starts (``benchmark.py``): every ``len // rows``-th training member."""
    train_rows = family().train
    return train_rows[:: max(1, len(train_rows) // rows)][:rows]


def toy_size(hidden: int | None = None, layers: int | None = None, heads: int | None = None,
             intermediate: int | None = None) -> dict:
    """``build_toy`` config for the size options: unset fields keep :class:`.model.ToyConfig`'s (shipped) defaults,
    except that ``intermediate`` follows ``2 * hidden`` when only ``hidden`` is given. Validated by ``ToyConfig``
    (bounds) and by the attention shape (``hidden`` divisible by ``heads``); raises ``ValueError`` naming the option."""
    cfg = {}
    if hidden is not None:
        cfg["hidden_size"] = hidden
        cfg["intermediate_size"] = 2 * hidden
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    if heads is not None:
        cfg["num_attention_heads"] = heads
    if intermediate is not None:
        cfg["intermediate_size"] = intermediate
    try:
        full = ToyConfig(**cfg)
    except Exception as exc:  # pydantic ValidationError: keep one line naming the field
        first = exc.errors()[0] if hasattr(exc, "errors") else {"loc": ("?",), "msg": str(exc)}
        raise ValueError(f"{first['loc'][0]}: {first['msg']}") from None
    if full.hidden_size % full.num_attention_heads:
        raise ValueError(f"--hidden {full.hidden_size} is not divisible by --heads {full.num_attention_heads}")
    return cfg


def load_weights(path: str | Path, size: dict | None = None):
    """A toy network (:func:`.model.build_toy` with config ``size``) with the safetensors state at ``path``
    (strict)."""
    from safetensors.torch import load_file

    net = build_toy(**(size or {}))
    net.load_state_dict(load_file(str(path)))
    return net.eval()


def train_one(kernel: str, gamma_indel: float, seed: int, steps: int | None = None, show_progress: bool = True,
              t_proposal: str = "uniform", size: dict | None = None, ins_law: str = "kernel"):
    """``(net, cfg, cpu_seconds, wall_seconds)``: ``CONFIGS[kernel]`` with ``gamma_del = gamma_ins = gamma_indel``
    (and ``t_proposal``, :func:`zoo.methods.dplm_evo.training.sample_t`; ``ins_law``, ``noise.Knobs.ins_law``), on
    ``build_toy(**size)`` (default: the shipped size)."""
    base = CONFIGS[kernel]
    cfg = dataclasses.replace(base, gamma_del=gamma_indel, gamma_ins=gamma_indel, t_proposal=t_proposal,
                              knobs=dataclasses.replace(base.knobs, ins_law=ins_law))
    if steps is not None:
        cfg = dataclasses.replace(cfg, steps=steps)
    data = family().train_tensor()
    g = setup_deterministic(seed)
    net = build_toy(**(size or {}))
    c0, w0 = time.process_time(), time.perf_counter()
    train(net, data, cfg, N_LATENT, g, show_progress=show_progress)
    return net, cfg, time.process_time() - c0, time.perf_counter() - w0


def evolve_rates(net, rows: int, seeds: int, prefix: str = "evolve") -> dict:
    """The spec's ``evolve`` sampler with ``net`` on ``rows`` starts for sampler seeds ``0 .. seeds − 1``: the
    provenance loop-indel rate per seed and pooled (in-loop over all net indels), keys prefixed by ``prefix``."""
    import zoo
    from zoo.methods.dplm_evo.metrics import loop_indel_rate_of

    spec_evolve = zoo.load("dplm-evo", variant="toy").samplers["evolve"]
    evolve = type(spec_evolve)(models={"net": net}, params=spec_evolve.params)
    starts = ["".join(AA[v] for v in x) for x in starts_of(rows)]
    per = [loop_indel_rate_of(evolve, starts, s) for s in range(seeds)]
    counted = [r for r in per if r["indels_provenance"]]  # a seed without net indels has no rate (nan)
    inside = sum(r["rate_provenance"] * r["indels_provenance"] for r in counted)
    total = sum(r["indels_provenance"] for r in counted)
    return {f"{prefix}_rows": rows, f"{prefix}_rates": [r["rate_provenance"] for r in per],
            f"{prefix}_indels": [r["indels_provenance"] for r in per],
            f"{prefix}_pooled": inside / total if total else float("nan")}


def evolve_columns(net, args) -> dict:
    """:func:`evolve_rates` of ``net`` (and of ``net`` with Bayes-placed edit heads with ``--bayes-placed``)."""
    if not args.evolve_seeds:
        return {}
    from zoo.methods.dplm_evo.metrics import BayesPlacedEditHeads

    out = evolve_rates(net, args.evolve_rows, args.evolve_seeds)
    if args.bayes_placed:
        out.update(evolve_rates(BayesPlacedEditHeads(net), args.evolve_rows, args.evolve_seeds, "bayes_placed"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=128, help="number of evolve starts (default 128)")
    ap.add_argument("--train", choices=KERNELS, help="train this kernel's config instead of reading shipped weights")
    ap.add_argument("--gamma-indel", type=float, default=1.0, help="gamma_del = gamma_ins for --train (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="training seed for --train (default 0, the shipped contextual)")
    ap.add_argument("--t-proposal", choices=("uniform", "square"), default="uniform",
                    help="how --train draws t (default uniform, the shipped recipe; square: importance-weighted)")
    ap.add_argument("--steps", type=int, default=None, help="training steps for --train (default: the config's)")
    ap.add_argument("--hidden", type=int, help="toy hidden size (default 64, the shipped network)")
    ap.add_argument("--layers", type=int, help="toy number of transformer layers (default 2)")
    ap.add_argument("--heads", type=int, help="toy attention heads (default 4)")
    ap.add_argument("--intermediate", type=int, help="toy feed-forward size (default 2 x hidden; shipped 128)")
    ap.add_argument("--weights", action="append", help="read these saved toy weights instead (repeatable)")
    ap.add_argument("--save", help="with --train: also save the weights here (safetensors)")
    ap.add_argument("--json", help="append the result rows to this JSON-lines file")
    ap.add_argument("--ins-law", choices=("kernel", "uniform"), default="kernel",
                    help="letter law of inserted residues for --train (default kernel, the shipped recipe)")
    ap.add_argument("--evolve-seeds", type=int, default=0,
                    help="also run the spec's evolve sampler for this many sampler seeds (default 0: no)")
    ap.add_argument("--evolve-rows", type=int, default=512, help="evolve starts per sampler seed (default 512)")
    ap.add_argument("--bayes-placed", action="store_true",
                    help="with --evolve-seeds: also place each network's edit mass by the family's exact law")
    args = ap.parse_args(argv)
    if not 1 <= args.rows <= 4096:
        ap.error(f"--rows: expected 1..4096, got {args.rows}")
    if args.train and args.weights:
        ap.error("--train and --weights are exclusive")
    if not 0 <= args.gamma_indel <= 100:
        ap.error(f"--gamma-indel: expected 0..100, got {args.gamma_indel}")
    if args.steps is not None and not 1 <= args.steps <= 100_000:
        ap.error(f"--steps: expected 1..100000, got {args.steps}")
    if not 0 <= args.evolve_seeds <= 64 or not 1 <= args.evolve_rows <= 4096:
        ap.error(f"--evolve-seeds / --evolve-rows: expected 0..64 / 1..4096, got {args.evolve_seeds} / {args.evolve_rows}")
    try:
        size = toy_size(args.hidden, args.layers, args.heads, args.intermediate)
    except ValueError as exc:
        ap.error(str(exc))
    starts = starts_of(args.rows)
    results = []
    if args.train:
        net, cfg, cpu, wall = train_one(args.train, args.gamma_indel, args.seed, args.steps, t_proposal=args.t_proposal,
                                      size=size, ins_law=args.ins_law)
        if args.save:
            save_checkpoint(net, args.save)
        res = head_indel_loop_share(net, starts)
        res.update(evolve_columns(net, args))
        results.append({"net": args.train, "gamma_indel": args.gamma_indel, "seed": args.seed, "steps": cfg.steps,
                        "t_proposal": cfg.t_proposal, "ins_law": args.ins_law, "size": ToyConfig(**size).model_dump(),
                        "params": sum(p.numel() for p in net.parameters()),
                        "train_cpu_s": round(cpu, 1), "train_wall_s": round(wall, 1), **res})
    elif args.weights:
        for path in args.weights:
            net = load_weights(path, size)
            results.append({"net": Path(path).name, **head_indel_loop_share(net, starts),
                            **evolve_columns(net, args)})
    else:
        for kernel in KERNELS:
            net = load_weights(WEIGHTS / f"dplm-evo-{kernel}.safetensors")
            results.append({"net": f"shipped {kernel}", **head_indel_loop_share(net, starts), **evolve_columns(net, args)})
    results.append({"net": "Bayes-optimal", **bayes_indel_loop_share(starts)})
    print(f"loop share of the edit heads' mass on {args.rows} clean evolve starts")
    print("| net | size (hidden / layers / heads / ffn) | steps | gamma_del = gamma_ins | seed | del | ins | mean "
          "| train CPU s (wall s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        secs = f"{r['train_cpu_s']:.0f} ({r['train_wall_s']:.0f})" if "train_cpu_s" in r else "-"
        sz = r.get("size")
        dims = (f"{sz['hidden_size']} / {sz['num_hidden_layers']} / {sz['num_attention_heads']} / "
                f"{sz['intermediate_size']}" if sz else "-")
        print(f"| {r['net']} | {dims} | {r.get('steps', '-')} | {r.get('gamma_indel', '-')} | {r.get('seed', '-')} | "
              f"{r['del']:.3f} | {r['ins']:.3f} | {r['mean']:.3f} | {secs} |")
    for r in results:
        if "del_loop" in r:
            print(f"{r['net']}: mean p_del per loop / core token {r['del_loop']:.2e} / {r['del_core']:.2e}, "
                  f"mean p_ins per loop / core gap {r['ins_loop']:.2e} / {r['ins_core']:.2e}")
    for r in results:
        for prefix, what in (("evolve", "trained heads"), ("bayes_placed", "edit mass placed by the exact law")):
            if f"{prefix}_pooled" in r:
                print(f"{r['net']}: evolve loop-indel rate ({what}) on {r[f'{prefix}_rows']} starts, sampler seeds 0 - "
                      f"{len(r[f'{prefix}_rates']) - 1}: " + " / ".join(
                          f"{v:.3f} ({n:.0f})" for v, n in zip(r[f"{prefix}_rates"], r[f"{prefix}_indels"]))
                      + f"; pooled {r[f'{prefix}_pooled']:.3f}")
    if args.json:
        with open(args.json, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
