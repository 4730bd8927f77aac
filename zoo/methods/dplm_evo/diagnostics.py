"""Diagnostic (h) of docs/methods/dplm-evo.NOTES.md: where the edit heads put their indel mass.

The loop share of the DPLM-Evo edit heads' probability mass on the bench's clean evolve starts
(``family().train[::len // rows][:rows]``), next to the Bayes-optimal heads' (:func:`.metrics.head_indel_loop_share`
/ :func:`.metrics.bayes_indel_loop_share`; deletion in the loop iff ``LEFT <= k < n − RIGHT``, insertion iff gap
``LEFT <= g <= n − RIGHT``), for the shipped networks or for networks trained here with other edit-loss weights,
sizes, ``t`` proposals or insertion laws (:func:`train_one`, not saved), optionally with the spec's ``evolve``
loop-indel rate per sampler seed (:func:`evolve_rates`). A one-off study, kept as functions the NOTES cite::

    import zoo
    from zoo.methods.dplm_evo import diagnostics as d
    pipe = zoo.load("dplm-evo")
    nets = {f"shipped {k}": pipe.models[r] for k, r in d.SHIPPED_ROLES.items()}
    print(d.format_rows(d.head_share_rows(nets, rows=128), rows=128))                    # the NOTES' item (h)
    net, cfg, cpu, wall = d.train_one("contextual", gamma_indel=5.0, seed=0)             # one trial network
    print(d.format_rows(d.head_share_rows({"contextual γ=5": net}, rows=128, evolve=pipe.procedures["evolve"],
                                          evolve_seeds=4, bayes_placed=True), rows=128))
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

__all__ = ["KERNELS", "SHIPPED_ROLES", "starts_of", "toy_size", "load_weights", "train_one", "evolve_rates",
           "head_share_rows", "format_rows"]

KERNELS = ("contextual", "uniform", "blosum62")
#: kernel -> the dplm-evo role of its shipped toy network
SHIPPED_ROLES = {"contextual": "net", "uniform": "net_uniform", "blosum62": "net_blosum"}


def starts_of(rows: int) -> list:
    """The bench's clean evolve starts (:mod:`.benchmark`): every ``len // rows``-th training member."""
    from .family import family

    if not 1 <= rows <= 4096:
        raise ValueError(f"rows: expected 1..4096, got {rows}")
    train_rows = family().train
    return train_rows[:: max(1, len(train_rows) // rows)][:rows]


def toy_size(hidden: int | None = None, layers: int | None = None, heads: int | None = None,
             intermediate: int | None = None) -> dict:
    """``build_toy`` config for these sizes: unset fields keep :class:`.model.ToyConfig`'s (shipped) defaults,
    except that ``intermediate`` follows ``2 * hidden`` when only ``hidden`` is given. Validated by ``ToyConfig``
    (bounds) and by the attention shape (``hidden`` divisible by ``heads``); raises ``ValueError`` naming the field."""
    from .model import ToyConfig

    cfg: dict[str, int] = {}
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
        raise ValueError(f"hidden_size: {full.hidden_size} is not divisible by num_attention_heads {full.num_attention_heads}")
    return cfg


def load_weights(path: Any, size: dict | None = None) -> Any:
    """A toy network (:func:`.model.build_toy` with config ``size``) with the safetensors state at ``path`` (a file
    the caller saved, e.g. with ``zoo.common.training.save_checkpoint``; strict)."""
    from safetensors.torch import load_file

    from .model import build_toy

    net = build_toy(**(size or {}))
    net.load_state_dict(load_file(str(path)))
    return net.eval()


def train_one(kernel: str, gamma_indel: float, seed: int, steps: int | None = None, show_progress: bool = True,
              t_proposal: str = "uniform", size: dict | None = None, ins_law: str = "kernel") -> tuple[Any, Any, float, float]:
    """``(net, cfg, cpu_seconds, wall_seconds)``: ``CONFIGS[kernel]`` with ``gamma_del = gamma_ins = gamma_indel``
    (and ``t_proposal``, :func:`.training.sample_t`; ``ins_law``, ``noise.Knobs.ins_law``), on ``build_toy(**size)``
    (default: the shipped size), trained exactly as the shipped networks are (one thread,
    ``setup_deterministic(seed)``, same data and draw order): ``("contextual", 1.0, 0)`` is the shipped contextual
    network."""
    from zoo.common.training import setup_deterministic

    from .family import N_LATENT, family
    from .model import build_toy
    from .training import CONFIGS, train

    if kernel not in KERNELS:
        raise ValueError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    if not 0 <= gamma_indel <= 100:
        raise ValueError(f"gamma_indel: expected 0..100, got {gamma_indel}")
    if steps is not None and not 1 <= steps <= 100_000:
        raise ValueError(f"steps: expected 1..100000, got {steps}")
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


def evolve_rates(net: Any, evolve: Any, rows: int, seeds: int, prefix: str = "evolve") -> dict:
    """The spec's ``evolve`` sampler (``evolve``: ``pipe.procedures["evolve"]``) with ``net`` on ``rows`` starts for
    sampler seeds ``0 .. seeds − 1``: the provenance loop-indel rate per seed and pooled (in-loop over all net
    indels), keys prefixed by ``prefix``."""
    from .alphabet import AA
    from .metrics import loop_indel_rate_of

    sampler = type(evolve)(models={"net": net}, params=evolve.params)
    starts = ["".join(AA[v] for v in x) for x in starts_of(rows)]
    per = [loop_indel_rate_of(sampler, starts, s) for s in range(seeds)]
    counted = [r for r in per if r["indels_provenance"]]  # a seed without net indels has no rate (nan)
    inside = sum(r["rate_provenance"] * r["indels_provenance"] for r in counted)
    total = sum(r["indels_provenance"] for r in counted)
    return {f"{prefix}_rows": rows, f"{prefix}_rates": [r["rate_provenance"] for r in per],
            f"{prefix}_indels": [r["indels_provenance"] for r in per],
            f"{prefix}_pooled": inside / total if total else float("nan")}


def head_share_rows(nets: dict[str, Any], rows: int = 128, evolve: Any = None, evolve_seeds: int = 0,
                    evolve_rows: int = 512, bayes_placed: bool = False, extra: dict[str, dict] | None = None) -> list[dict]:
    """One row per network of ``nets`` (name -> network): :func:`.metrics.head_indel_loop_share` on
    :func:`starts_of` ``(rows)``, with :func:`evolve_rates` for ``evolve_seeds`` sampler seeds when ``evolve`` is
    given (and the same with the edit mass placed by the exact law, :class:`.metrics.BayesPlacedEditHeads`, with
    ``bayes_placed``); ``extra[name]`` is merged into that row; a last row for the Bayes-optimal heads."""
    from .metrics import BayesPlacedEditHeads, bayes_indel_loop_share, head_indel_loop_share

    if not 0 <= evolve_seeds <= 64 or not 1 <= evolve_rows <= 4096:
        raise ValueError(f"evolve_seeds / evolve_rows: expected 0..64 / 1..4096, got {evolve_seeds} / {evolve_rows}")
    starts = starts_of(rows)
    out = []
    for name, net in nets.items():
        r = {"net": name, **(extra or {}).get(name, {}), **head_indel_loop_share(net, starts)}
        if evolve is not None and evolve_seeds:
            r.update(evolve_rates(net, evolve, evolve_rows, evolve_seeds))
            if bayes_placed:
                r.update(evolve_rates(BayesPlacedEditHeads(net), evolve, evolve_rows, evolve_seeds, "bayes_placed"))
        out.append(r)
    out.append({"net": "Bayes-optimal", **bayes_indel_loop_share(starts)})
    return out


def format_rows(results: list[dict], rows: int) -> str:
    """The markdown table of :func:`head_share_rows` and its per-position and evolve lines."""
    lines = [f"loop share of the edit heads' mass on {rows} clean evolve starts",
             "| net | size (hidden / layers / heads / ffn) | steps | gamma_del = gamma_ins | seed | del | ins | mean "
             "| train CPU s (wall s) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        secs = f"{r['train_cpu_s']:.0f} ({r['train_wall_s']:.0f})" if "train_cpu_s" in r else "-"
        sz = r.get("size")
        dims = (f"{sz['hidden_size']} / {sz['num_hidden_layers']} / {sz['num_attention_heads']} / "
                f"{sz['intermediate_size']}" if sz else "-")
        lines.append(f"| {r['net']} | {dims} | {r.get('steps', '-')} | {r.get('gamma_indel', '-')} | {r.get('seed', '-')} | "
                     f"{r['del']:.3f} | {r['ins']:.3f} | {r['mean']:.3f} | {secs} |")
    for r in results:
        if "del_loop" in r:
            lines.append(f"{r['net']}: mean p_del per loop / core token {r['del_loop']:.2e} / {r['del_core']:.2e}, "
                         f"mean p_ins per loop / core gap {r['ins_loop']:.2e} / {r['ins_core']:.2e}")
    for r in results:
        for prefix, what in (("evolve", "trained heads"), ("bayes_placed", "edit mass placed by the exact law")):
            if f"{prefix}_pooled" in r:
                lines.append(f"{r['net']}: evolve loop-indel rate ({what}) on {r[f'{prefix}_rows']} starts, sampler seeds "
                             f"0 - {len(r[f'{prefix}_rates']) - 1}: " + " / ".join(
                                 f"{v:.3f} ({n:.0f})" for v, n in zip(r[f"{prefix}_rates"], r[f"{prefix}_indels"]))
                             + f"; pooled {r[f'{prefix}_pooled']:.3f}")
    return "\n".join(lines)
