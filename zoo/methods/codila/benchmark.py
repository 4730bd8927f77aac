"""CoDiLA on the toy variants against DLM decoding of the same DLM, one run, one table per toy (and a PNG).

``toy`` (XOR-words, 4 words of 2 letters, every letter's marginal uniform): CoDiLA static (B = 2 and 4),
dynamic (a sweep of tau), AR verification, and the top-1-conditioned AR, against DLM parallel decoding
(2 tokens per forward in blocks of 2: each fully masked word drawn from independent marginals, valid with
probability 0.25) and sequential decoding (1 token per forward). Columns: sequence validity, word validity
(+- its binomial standard error), DLM and local-AR forwards per sample, tokens per DLM forward, ms per sample.
The dynamic row at matched validity is the one with the most tokens per DLM forward whose validity is within
two standard errors of sequential decoding's.

``toy-trap`` (a context word, then a target word whose two context-dependent joints share their top-1 marginals
and have disjoint supports): soft vs top-1 conditioning (Theorem 3.3), plus the DLM baselines.

Also the trained block-vs-token loss gap on fully masked XOR words (Theorem 3.2: log 4 = 1.386 nats), and the
paper's HumanEval syntax-error rates (Dream-Coder 18 / 38 / 70 % vs CoDiLA 4 / 13 / 16 % at K = B = 2 / 4 / 8)
printed beside the toy's invalid-sample rates.

    zoo bench codila --samples 512 [--out-dir docs/methods]   # the spec's numbers; codila-bench.png into --out-dir
    zoo bench codila --quick                                  # 64 samples, three tau values, stretch seed 0 only

``toy-stretch`` (word 1 determines words 2-4: one free letter, then 7 determined ones), :mod:`.stretch`: the dynamic
schedule's tau sweep against static B = 2 / 4 and sequential / parallel DLM decoding over training seeds
``--stretch-seeds`` (0 shipped, the others trained by the shipped trainer function and cached), mean ± sd, the
card's pre-registered verdict, and ``codila-stretch.png``.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .params import BenchOptions

PAPER_SYNTAX_ERRORS = {2: (18, 4), 4: (38, 13), 8: (70, 16)}  # K = B: (Dream-Coder %, CoDiLA %)


def _rows_xor(pipe, taus: list[float]) -> list[tuple[str, object]]:
    s = pipe.procedures
    rows = [("DLM parallel (2 tok/fwd, blocks of 2)", s["dlm-parallel"]),
            ("DLM sequential (1 tok/fwd)", s["dlm-sequential"]),
            ("CoDiLA static B=2 (paper)", s["codila-static"]),
            ("CoDiLA static B=4", s["codila-static-b4"])]
    rows += [(f"CoDiLA dynamic B=4 tau={t:g}", s["codila-dynamic"].with_params(entropy_threshold=t)) for t in taus]
    rows += [("CoDiLA verify (2 tok/fwd)", s["codila-verify"]),
             ("CoDiLA top-1 conditioning B=2", s["codila-topk"])]
    return rows


def _rows_trap(pipe) -> list[tuple[str, object]]:
    s = pipe.procedures
    return [("DLM parallel (2 tok/fwd, blocks of 2)", s["dlm-parallel"]),
            ("DLM sequential (1 tok/fwd)", s["dlm-sequential"]),
            ("CoDiLA static B=2, soft (paper)", s["codila-static"]),
            ("CoDiLA static B=2, top-1 conditioning", s["codila-topk"])]


def run_table(pipe, rows, task, samples: int, seed: int) -> list[dict]:
    from .metrics import evaluate

    out = []
    for label, proc in rows:
        r = evaluate(proc, task, samples, seed)
        r.update(method=label, ms_per_sample=1000 * r["wall_s"] / samples)
        out.append(r)
        print(f"  {label}: validity {r['validity']:.3f}", file=sys.stderr)
    return out


def print_table(title: str, rows: list[dict]) -> str:
    lines = [title,
             f"| {'method':<40} | {'valid':>5} | {'word valid':>12} | {'DLM fwd':>7} | {'AR fwd':>6} | {'tok/DLM fwd':>11} | {'ms/sample':>9} |",
             "|" + "|".join("-" * n for n in (42, 7, 14, 9, 8, 13, 11)) + "|"]
    for r in rows:
        wv = f"{r['word_validity']:.3f}±{r['word_validity_se']:.3f}"
        lines.append(f"| {r['method']:<40} | {r['validity']:5.3f} | {wv:>12} | {r['dlm_forwards']:7.2f} | {r['ar_forwards']:6.2f} | "
                     f"{r['tokens_per_dlm_forward']:11.2f} | {r['ms_per_sample']:9.1f} |")
    return "\n".join(lines)


def matched_dynamic(rows: list[dict]) -> dict | None:
    """The dynamic row with the most tokens per DLM forward whose validity is within two binomial standard
    errors of sequential decoding's."""
    seq = next(r for r in rows if r["method"].startswith("DLM sequential"))
    n = seq["samples"]
    dyn = [r for r in rows if "dynamic" in r["method"]]
    ok = [r for r in dyn if r["validity"] >= seq["validity"] - 2 * math.sqrt(max(seq["validity"] * (1 - seq["validity"]), 1 / n) / n)]
    return max(ok, key=lambda r: r["tokens_per_dlm_forward"]) if ok else None


def plot(res: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    markers = "osD^v<>ph*X"
    for i, r in enumerate(res["xor"]):
        ax.scatter(r["tokens_per_dlm_forward"], r["validity"], s=45, marker=markers[i % len(markers)],
                   label=r["method"].replace("CoDiLA ", "").replace(" (paper)", "*"))
    ax.legend(fontsize=7, loc="center right")
    ax.axhline(0.25**4, color="grey", ls=":", lw=1)
    ax.set_xlabel("tokens per DLM forward")
    ax.set_ylabel("sequence validity")
    ax.set_title(f"XOR-words ({res['samples']} unconditional samples)")
    ax.grid(alpha=0.3)
    ax = axes[1]
    labels = [r["method"].replace("CoDiLA static B=2, ", "").replace(" (2 tok/fwd, blocks of 2)", "").replace(" (1 tok/fwd)", "")
              for r in res["trap"]]
    ax.bar(range(len(labels)), [r["validity"] for r in res["trap"]], color=["C7", "C7", "C0", "C3"])
    ax.set_xticks(range(len(labels)), labels, rotation=15, fontsize=8)
    ax.axhline(0.5, color="C3", ls=":", lw=1, label="top-1 bound 0.5")
    ax.set_ylabel("sequence validity")
    ax.set_title("trap toy: soft vs top-1 conditioning")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """CoDiLA's schedules against DLM parallel / sequential decoding on the XOR-words, trap and stretch toys (stretch:
    over training seeds, mean ± sd), the block-vs-token loss gap and the paper's syntax-error rates beside the toy's
    (--quick: 64 samples, three tau values, stretch seed 0)."""
    import torch

    from .core import log_uniform
    from .metrics import _task
    from .sampler import excluded_ids
    from .training import loss_gap

    torch.set_num_threads(1)
    t0 = time.time()
    samples, seed, taus = opts.samples, ctx.seed, list(opts.taus)
    res: dict = {"samples": samples, "seed": seed}
    xor = ctx.pipeline("toy")
    res["xor"] = run_table(xor, _rows_xor(xor, taus), _task(xor), samples, seed)
    trap = ctx.pipeline("toy-trap")
    res["trap"] = run_table(trap, _rows_trap(trap), _task(trap), samples, seed)
    dlm, ar = xor.models["dlm"], xor.models["local_ar"]
    tok = dlm.zoo_tokenizer
    ex = excluded_ids(tok, tok.mask_token_id, tok.think_ids, allow_eos=False)
    res["loss_gap"] = loss_gap(dlm, ar, _task(xor), tok, 4096, 2, seed, tok.think_ids, ex)
    res["loss_gap_top1"] = loss_gap(dlm, xor.models["local_ar_top1"], _task(xor), tok, 4096, 2, seed, tok.think_ids, ex,
                                    conditioning="topk", topk=1)
    res["seconds"] = time.time() - t0
    text = [print_table(f"\nXOR-words toy ({samples} unconditional samples, seed {seed}; one CPU thread, torch "
                        f"{torch.__version__})", res["xor"])]
    m = matched_dynamic(res["xor"])
    res["dynamic_matched"] = m
    if m is not None:
        seq = next(r for r in res["xor"] if r["method"].startswith("DLM sequential"))
        text.append(f"dynamic at matched validity ({m['method']}): validity {m['validity']:.3f} vs sequential "
                    f"{seq['validity']:.3f}; tokens per DLM forward {m['tokens_per_dlm_forward']:.2f} vs 1.00 "
                    f"(DLM forwards {m['dlm_forwards']:.2f} vs {seq['dlm_forwards']:.2f}, + {m['ar_forwards']:.2f} AR forwards)")
    text.append(print_table(f"\ntrap toy ({samples} samples): top-1 conditioning is bounded by 0.5 on the target word",
                            res["trap"]))
    lg = res["loss_gap"]
    text.append(f"\nblock-vs-token loss gap on fully masked XOR words (4096 blocks): token NLL {lg['token_nll']:.4f}, "
                f"block NLL {lg['block_nll']:.4f}, gap {lg['gap']:.4f} ± {lg['gap_se']:.4f} nats "
                f"(Theorem 3.2: total correlation log 4 = {log_uniform(4):.4f}); top-1 AR gap {res['loss_gap_top1']['gap']:.4f}")
    par = next(r for r in res["xor"] if r["method"].startswith("DLM parallel"))
    cod = {2: next(r for r in res["xor"] if r["method"].startswith("CoDiLA static B=2")),
           4: next(r for r in res["xor"] if r["method"].startswith("CoDiLA static B=4"))}
    text.append("\ninvalid-output rate, paper (HumanEval syntax errors, Dream-Coder-7B) vs toy (invalid XOR sequences):")
    text.append("| K=B | paper DLM % | paper CoDiLA % | toy DLM parallel % | toy CoDiLA static % |")
    text.append("|-----|-------------|----------------|--------------------|---------------------|")
    for k, (pd, pc) in PAPER_SYNTAX_ERRORS.items():
        toy_c = f"{100 * (1 - cod[k]['validity']):.1f}" if k in cod else "-"
        toy_d = f"{100 * (1 - par['validity']):.1f}" if k == 2 else "-"
        text.append(f"| {k:>3} | {pd:>11} | {pc:>14} | {toy_d:>18} | {toy_c:>19} |")
    if opts.stretch_seeds:
        from . import stretch

        res["stretch"] = stretch.study(ctx, list(opts.stretch_seeds), list(opts.stretch_taus), samples, seed)
        res["seconds"] = time.time() - t0
        text.append(stretch.print_study(res["stretch"]))
        stretch.plot(res["stretch"], ctx.figure("codila-stretch.png"))
    ctx.report("\n".join(text))
    plot(res, ctx.figure("codila-bench.png"))
    return res
