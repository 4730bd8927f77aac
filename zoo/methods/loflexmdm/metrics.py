"""Exact metrics of the toy variants and the metric checks ``fn(pipeline, ...) -> float`` of the specs.

* validity: membership in the task's support (checksum: format and check digit = last free digit; brackets: balanced);
* length TV: total variation between the sampled length histogram and the task's exact length law;
* learned schedule: φ's per-position insertion multipliers ``b_in^φ`` on exact draws (checksum position vs free
  digits; the paper's claim is that the determined token is inserted late, i.e. has a *smaller* b_in);
* on the ``chain`` task: the error split (missing tokens only vs conflicting tokens), φ's multipliers by distance
  from the end (:func:`chain_schedule`) and the Bayes-limit validity of a schedule (:func:`bayes_validity`).
Samples are unconditional τ-leaping draws from one generator seeded by ``seed``.
"""
from __future__ import annotations

import math
import time
from typing import Any

import torch

from registry.contract import metric_check

from .params import CHECK_SAMPLES, InsertionRatioParams, OrderCeilingParams, SampledCheckParams
from .sampler import SamplerConfig, tau_leap
from .tasks import Task


def task_of(model: Any) -> Task:
    name = getattr(model, "zoo_task", None)
    if name is None:
        raise ValueError("loflexmdm metrics run on the toy variants (a model that names its task)")
    return Task(name)


def sample_texts(model: Any, n: int, cfg: SamplerConfig, seed: int = 0) -> tuple[list[str], dict]:
    tok = model.zoo_tokenizer
    g = torch.Generator().manual_seed(seed)
    tokens, lengths, stats = tau_leap(model, n, cfg, g, tok.eos_token_id, tok.mask_token_id, tok.pad_token_id, model.zoo_max_length)
    texts = [tok.decode(tokens[i, : int(lengths[i]) - 1].tolist(), skip_special_tokens=True) for i in range(n)]
    return texts, stats


def length_tv(texts: list[str], task: Task) -> float:
    """TV between the empirical length law of ``texts`` and the task's exact one (lengths outside the support
    count in full)."""
    law = task.length_law()
    counts: dict[int, int] = {}
    for s in texts:
        counts[len(s)] = counts.get(len(s), 0) + 1
    keys = set(law) | set(counts)
    return 0.5 * sum(abs(counts.get(k, 0) / len(texts) - law.get(k, 0.0)) for k in keys)


def evaluate(model: Any, n: int, cfg: SamplerConfig, seed: int = 0) -> dict[str, float]:
    """Validity (with its binomial SE), length TV, and on the checksum task the format rate and the checksum
    accuracy given a well-formed sample."""
    task = task_of(model)
    t0 = time.perf_counter()
    texts, stats = sample_texts(model, n, cfg, seed)
    wall = time.perf_counter() - t0
    ok = sum(task.valid(s) for s in texts)
    v = ok / n
    out = {"validity": v, "validity_se": math.sqrt(max(v * (1 - v), 1e-12) / n), "length_tv": length_tv(texts, task),
           "mean_length": sum(map(len, texts)) / n, "samples": n, "steps": cfg.max_steps, "wall_s": wall,
           "final_argmax_filled": sum(stats["final_argmax_filled"]) / n}
    if task.name == "chain":
        out.update(chain_error_split(texts, task))
    if task.name == "checksum":
        fmt = [s for s in texts if len(s) >= 5 and s[-2] == "=" and all(c in "01234" for c in s[:-2] + s[-1]) and 3 <= len(s) - 2 <= 6]
        out["format_rate"] = len(fmt) / n
        out["checksum_given_format"] = sum(task.valid(s) for s in fmt) / max(len(fmt), 1)
    return out


@torch.no_grad()
def learned_schedule(model: Any, n: int = 512, seed: int = 0) -> dict[str, Any]:
    """φ's insertion multipliers on ``n`` exact draws: per latent position (mean over sequences that have it) and,
    on the checksum task, the mean over checksum tokens vs free digits vs separators, and the Spearman correlation
    between b_in and "is the checksum" over all free positions."""
    task = task_of(model)
    tok = model.zoo_tokenizer
    g = torch.Generator().manual_seed(seed)
    texts = task.sample_texts(n, g)
    z1, fixed, valid = task.encode_latents(texts, tok)
    b_in, _ = model.aux_rates(z1, valid)
    free = valid & ~fixed
    per_pos = [(float(b_in[:, j][free[:, j]].mean()) if bool(free[:, j].any()) else float("nan")) for j in range(z1.shape[1])]
    out: dict[str, Any] = {"per_position": per_pos, "mean_all": float(b_in[free].mean())}
    if task.name == "checksum":
        lengths = valid.sum(1) - 1  # tokens before <eos>
        idx = torch.arange(z1.shape[1])[None]
        is_check = idx == (lengths - 1)[:, None]
        is_sep = idx == (lengths - 2)[:, None]
        is_digit = free & ~is_check & ~is_sep
        out.update(checksum=float(b_in[is_check].mean()), free=float(b_in[is_digit].mean()), separator=float(b_in[is_sep].mean()))
        out["ratio"] = out["checksum"] / out["free"]
        x = b_in[free & ~is_sep].double()
        y = is_check[free & ~is_sep].double()
        rx = x.argsort().argsort().double()
        rx = rx - rx.mean()
        yy = y - y.mean()
        out["spearman"] = float((rx * yy).sum() / (rx.norm() * yy.norm()).clamp_min(1e-12))
        # per free-token rank (first digit .. last digit, separator, checksum) averaged over lengths
        out["by_length"] = {int(L): [float(v) for v in b_in[(lengths == L)][0, : int(L)]] for L in lengths.unique()}
    return out


def _is_subsequence(a: str, b: str) -> bool:
    it = iter(b)
    return all(c in it for c in a)


def chain_error_split(texts: list[str], task: Task) -> dict[str, float]:
    """Chain task: the fractions of ``texts`` that are valid, that only *miss* tokens (a proper subsequence of a
    root-to-leaf path: the τ-leaping insertion grid left positions un-inserted; no token is wrong) and that
    *conflict* (no path contains them in order: a wrong token, an extra one, or two tokens of different branches,
    what drawing dependent tokens in the same step produces)."""
    paths = list(task.support())
    n = max(len(texts), 1)
    valid = [task.valid(s) for s in texts]
    missing = [not v and any(_is_subsequence(s, p) for p in paths) for s, v in zip(texts, valid)]
    return {"missing_only": sum(missing) / n, "conflict": sum(not v and not m for v, m in zip(valid, missing)) / n}


@torch.no_grad()
def chain_schedule(model: Any, n: int = 2048, seed: int = 0) -> dict[str, Any]:
    """φ's insertion multipliers on ``n`` exact draws of the chain task, by distance from the end (0 = the leaf, the
    only token no other token determines; d ≥ 1 = determined by its right neighbour). ``ratio`` = mean b_in of the
    determined tokens / mean b_in of the leaf (< 1: determined tokens inserted later, the paper's claim; FlexMDM:
    exactly 1); ``mean_time`` = the implied mean insertion time ``E[T_in] = B(1 + 1/a, b) b`` (``1/(1 + b)`` at a = 1);
    ``spearman`` = Spearman correlation of b_in with the distance from the end over all positions (the claim: < 0,
    ideal −1 for a strict right-to-left order; the paper's star-graph leaves-to-centre correlation is read the same
    way; it summarises a monotone profile only, so read it with ``by_distance``); ``by_position`` = the same
    multipliers by position from the start (0 = the root), ``root`` its first entry."""
    task = task_of(model)
    if task.name != "chain":
        raise ValueError(f"chain_schedule runs on the chain task, not {task.name!r}")
    tok = model.zoo_tokenizer
    texts = task.sample_texts(n, torch.Generator().manual_seed(seed))
    z1, fixed, valid = task.encode_latents(texts, tok)
    b_in, _ = model.aux_rates(z1, valid)
    free = valid & ~fixed
    lengths = free.sum(1)
    dist = (lengths[:, None] - 1 - torch.arange(z1.shape[1])[None]).masked_fill(~free, -1)
    b = b_in.double()
    by_d = [float(b[dist == d].mean()) for d in range(task.max_len) if bool((dist == d).any())]
    by_pos = [float(b[:, i][free[:, i]].mean()) for i in range(task.max_len) if bool(free[:, i].any())]
    a = float(model.a)
    mean_time = [float(torch.exp(torch.lgamma(torch.tensor(1 + 1 / a)) + torch.lgamma(torch.tensor(bd)) - torch.lgamma(torch.tensor(1 + 1 / a + bd))) * bd)
                 for bd in by_d]
    x, y = b[free], dist[free].double()
    rank = lambda v: v.argsort().argsort().double()  # noqa: E731  (b ties are measure-zero; d ties: average rank below)
    ry = torch.zeros_like(y)
    for d in y.unique():
        ry[y == d] = rank(y)[y == d].mean()
    rx, ry = rank(x) - rank(x).mean(), ry - ry.mean()
    spearman = float((rx * ry).sum() / (rx.norm() * ry.norm()).clamp_min(1e-12))
    leaf, det = float(b[dist == 0].mean()), float(b[dist >= 1].mean())
    return {"by_distance": by_d, "by_position": by_pos, "mean_time_by_distance": mean_time, "leaf": leaf, "determined": det,
            "ratio": det / leaf, "root": float(b[:, 0][free[:, 0]].mean()),
            "spearman": spearman if float(x.std()) > 0 else 0.0}


@torch.no_grad()
def reward_finite_differences(model: Any, n: int = 4096, reps: int = 6, delta: float = 0.5, seed: int = 0) -> dict[str, float]:
    """Chain task: how the trained generator's expected loss ``E[L]`` (the paper's hazard-weighted rate-matching
    loss, :func:`~.core.rate_matching_loss`, i.e. φ's REINFORCE reward with the sign flipped) changes when φ's
    multiplier is raised by ``delta`` at the leaf only, or at every determined token, with θ fixed: ``reps`` batches
    of ``n`` exact draws, antithetic t, common random numbers across the three schedules. A negative ``d_leaf``
    means inserting the leaf earlier lowers the loss; the claim needs it below the per-token effect of inserting a
    determined token earlier (``d_determined_per_token`` = ``d_determined`` / the mean number of determined tokens
    per row); ``se_*`` are the SEs over the batches."""
    from .core import antithetic_times, noise, rate_matching_loss

    task = task_of(model)
    if task.name != "chain":
        raise ValueError(f"reward_finite_differences runs on the chain task, not {task.name!r}")
    tok = model.zoo_tokenizer
    diffs: dict[str, list[float]] = {"leaf": [], "determined": []}
    base_losses, n_det = [], []
    for r in range(reps):
        g = torch.Generator().manual_seed(seed + r)
        texts = task.sample_texts(n, g)
        z1, fixed, valid = task.encode_latents(texts, tok)
        t = antithetic_times(n, g)
        b_in, b_um = model.aux_rates(z1, valid)
        free = valid & ~fixed
        leaf = free & (torch.arange(z1.shape[1])[None] == (free.sum(1, keepdim=True) - 1))
        n_det.append(float((free & ~leaf).sum(1).double().mean()))
        state = g.get_state()
        losses = {}
        for name, bump in (("base", None), ("leaf", leaf), ("determined", free & ~leaf)):
            g.set_state(state)  # common random numbers: the same uniforms for every schedule
            b = b_in if bump is None else b_in + delta * bump
            nz = noise(z1, fixed, valid, t, model.a, b, b_um, tok.mask_token_id, tok.pad_token_id, g)
            logits, bi, bu = model.generator_rates(nz.rows.tokens, nz.rows.attention_mask, t)
            losses[name] = float(rate_matching_loss(logits, bi, bu, nz, z1, fixed, valid, t, model.a, b, b_um, z1.shape[1]).mean())
        base_losses.append(losses["base"])
        for k in diffs:
            diffs[k].append(losses[k] - losses["base"])
    sem = lambda x: float(torch.tensor(x).std() / len(x) ** 0.5) if len(x) > 1 else float("nan")  # noqa: E731
    per_tok = sum(n_det) / reps
    return {"loss": sum(base_losses) / reps, "d_leaf": sum(diffs["leaf"]) / reps, "se_leaf": sem(diffs["leaf"]),
            "d_determined": sum(diffs["determined"]) / reps, "se_determined": sem(diffs["determined"]), "delta": delta,
            "determined_per_row": per_tok, "d_determined_per_token": sum(diffs["determined"]) / reps / per_tok,
            "se_determined_per_token": sem(diffs["determined"]) / per_tok}


def phi_schedule(model: Any, task: Task) -> dict[str, list[float]]:
    """φ's multipliers on every sequence of ``task``'s support (``{text: [b_in per position]}``), the input of
    :class:`~.oracle.ExactPosteriorModel`; FlexMDM (no φ): all 1."""
    tok = model.zoo_tokenizer
    texts = list(task.support())
    z1, _, valid = task.encode_latents(texts, tok)
    with torch.no_grad():
        b_in, _ = model.aux_rates(z1, valid)
    return {s: [float(v) for v in b_in[i, : len(s)]] for i, s in enumerate(texts)}


def planted_schedule(task: Task, kind: str, b_free: float = 30.0, b_floor: float = 1.01) -> dict[str, list[float]]:
    """A fixed order for :func:`bayes_validity`: ``linear`` (FlexMDM: all 1), ``leaf-first`` (the last token ``b_free``,
    every determined token at φ's floor ``b_floor``: the paper's claim taken to its limit within the schedule
    family) or its mirror ``root-first`` (the first token ``b_free``, the rest at the floor: the same multipliers,
    the wrong end)."""
    out = {}
    for s in task.support():
        L = len(s)
        if kind == "linear":
            out[s] = [1.0] * L
        elif kind == "leaf-first":
            out[s] = [b_floor] * (L - 1) + [b_free]
        elif kind == "root-first":
            out[s] = [b_free] + [b_floor] * (L - 1)
        else:
            raise ValueError(f"kind must be linear, leaf-first or root-first, got {kind!r}")
    return out


def bayes_validity(task: Task, b_in: dict[str, list[float]] | None, n: int, cfg: SamplerConfig, seed: int = 0) -> dict[str, float]:
    """Validity (and its error split) of ``n`` τ-leaping draws (``cfg``, seed ``seed``) whose generator is the exact
    posterior of ``task`` under the per-position schedule ``b_in`` (:class:`~.oracle.ExactPosteriorModel`): what a
    perfectly trained generator reaches under that schedule and sampler at ``cfg.max_steps`` steps (the Bayes
    reference; not a bound on a trained generator, whose conditionals can be sharper than the posterior and so
    conflict less often under the factorised τ-leaping draws)."""
    from .oracle import ExactPosteriorModel

    tok = task.tokenizer()
    model = ExactPosteriorModel(task.support(), tok, b_in)
    g = torch.Generator().manual_seed(seed)
    tokens, lengths, stats = tau_leap(model, n, cfg, g, tok.eos_token_id, tok.mask_token_id, tok.pad_token_id, task.latent_len)
    texts = [tok.decode(tokens[i, : int(lengths[i]) - 1].tolist(), skip_special_tokens=True) for i in range(n)]
    v = sum(task.valid(s) for s in texts) / n
    out = {"validity": v, "validity_se": math.sqrt(max(v * (1 - v), 1e-12) / n), "length_tv": length_tv(texts, task),
           "samples": n, "steps": cfg.max_steps}
    if task.name == "chain":
        out.update(chain_error_split(texts, task))
    return out


def oracle_length_tv(task_name: str, steps: int, n: int, seed: int = 0, a: float = 1.0, b: float = 1.0) -> float:
    """Length TV of ``n`` τ-leaping draws (plain sampler) whose generator is the exact-rate oracle of the task's
    length law under the shared schedule ``(a, b)`` (default: FlexMDM's linear one): the τ-leaping grid's own
    error, which no trained generator can beat."""
    from .oracle import OracleLengthModel

    task = Task(task_name)
    tok = task.tokenizer()
    model = OracleLengthModel(task.length_law(), tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols], a, b)
    g = torch.Generator().manual_seed(seed)
    _, lengths, _ = tau_leap(model, n, SamplerConfig(max_steps=steps), g, tok.eos_token_id, tok.mask_token_id, tok.pad_token_id,
                             4 * task.max_len)
    return length_tv(["x" * (int(k) - 1) for k in lengths], task)


def insertion_calibration(model: Any, n: int, steps: int, seed: int = 0, t_bins: int = 20,
                          a: float = 1.0, b: float = 1.0) -> dict[tuple[float, int], tuple[float, float, int]]:
    """Per ``(t bin, current length k)`` along the model's **own** τ-leaping trajectories (plain sampler, ``n``
    rows, seed ``seed``): ``(mean model remaining, mean exact remaining, row-steps)``.

    Model remaining = ``Σ_gaps b_in^θ · h(t) · (1 - F(t))/f(t)`` = ``Σ_gaps b_in^θ / b`` (the expected number of
    insertions still to come that the generator's total rate implies under the shared schedule ``(a, b)``); exact
    remaining = ``E[L - k | k, t]`` of the task's length law (:class:`~.oracle.OracleLengthModel`). The length
    process is a pure birth process, so the sampled length law is right iff the first matches the second wherever
    trajectories go; the table shows *which* lengths a trained generator gets wrong and when. Only meaningful for a
    generator whose schedule is shared by all positions (FlexMDM, or the oracle itself)."""
    from .oracle import OracleLengthModel

    task = task_of(model)
    tok = model.zoo_tokenizer
    oracle = OracleLengthModel(task.length_law(), tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols], a, b)
    acc: dict[tuple[float, int], list[float]] = {}

    class _Recorder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.inner = model.a, model

        def generator_rates(self, tokens: torch.Tensor, key_mask: torch.Tensor, t: torch.Tensor):
            logits, b_in, b_um = model.generator_rates(tokens, key_mask, t)
            k = key_mask.sum(1) - 1
            total = (b_in * key_mask).sum(1).double() / b
            exact = oracle.expected_remaining(k, t)
            tb = round(float(t[0]) * t_bins) / t_bins
            for kk in k.unique().tolist():
                sel = k == kk
                r = acc.setdefault((tb, int(kk)), [0.0, 0.0, 0])
                r[0] += float(total[sel].sum())
                r[1] += float(exact[sel].sum())
                r[2] += int(sel.sum())
            return logits, b_in, b_um

    g = torch.Generator().manual_seed(seed)
    tau_leap(_Recorder(), n, SamplerConfig(max_steps=steps), g, tok.eos_token_id, tok.mask_token_id, tok.pad_token_id,
             model.zoo_max_length)
    return {key: (r[0] / r[2], r[1] / r[2], int(r[2])) for key, r in sorted(acc.items())}


def _cfg(pipeline: Any, sampler: str, steps: int | None) -> tuple[Any, SamplerConfig]:
    proc = pipeline.procedures[sampler]
    cfg = proc.cfg if steps is None else SamplerConfig(steps, proc.cfg.confidence, proc.cfg.top_p, proc.cfg.top_k, proc.cfg.count_1)
    return proc.model, cfg


def evaluate_once(pipeline: Any, sampler: str, n: int, steps: int | None, seed: int = 0) -> dict[str, float]:
    model, cfg = _cfg(pipeline, sampler, steps)
    if not hasattr(pipeline, "memo"):
        return evaluate(model, n, cfg, seed)
    return pipeline.memo(("loflexmdm.evaluate", sampler, n, cfg, seed), lambda: evaluate(model, n, cfg, seed))


@metric_check(params=SampledCheckParams)
def validity(pipeline: Any, sampler: str = "tau-leaping", n: int = CHECK_SAMPLES, steps: int | None = None) -> float:
    """Fraction of ``n`` unconditional samples (seed 0) in the task's support."""
    return evaluate_once(pipeline, sampler, n, steps)["validity"]


@metric_check(params=SampledCheckParams)
def length_tv_check(pipeline: Any, sampler: str = "tau-leaping", n: int = CHECK_SAMPLES, steps: int | None = None) -> float:
    """TV between the sampled and the exact length law over ``n`` unconditional samples (seed 0)."""
    return evaluate_once(pipeline, sampler, n, steps)["length_tv"]


@metric_check(params=SampledCheckParams)
def check_digit_accuracy(pipeline: Any, sampler: str = "tau-leaping", n: int = CHECK_SAMPLES, steps: int | None = None) -> float:
    """Checksum task: among ``n`` unconditional samples (seed 0) that are well formed (3-6 digits, '=', one
    digit), the fraction whose check digit is right (chance: 0.2)."""
    return evaluate_once(pipeline, sampler, n, steps)["checksum_given_format"]


@metric_check(params=InsertionRatioParams)
def determined_insertion_ratio(pipeline: Any, n: int = 512) -> float:
    """Chain task: φ's mean insertion multiplier b_in of the determined tokens (all but the last) divided by that of
    the leaf (< 1: the determined tokens are inserted later, the paper's claim; FlexMDM: exactly 1)."""
    return chain_schedule(pipeline.models["model"], n)["ratio"]


@metric_check(params=OrderCeilingParams)
def order_ceiling(pipeline: Any, n: int = 500, steps: int = 16) -> float:
    """Chain task: validity of ``n`` τ-leaping draws (plain sampler, ``steps`` steps, seed 0) of the exact-posterior
    generator under the pipeline's own schedule (LoFlexMDM: its φ's multipliers on every sequence; FlexMDM: the
    linear schedule), i.e. what the order this model inserts in gives a perfectly trained generator (a Bayes
    reference, not a bound on the trained one)."""
    model = pipeline.models["model"]
    task = task_of(model)
    return bayes_validity(task, phi_schedule(model, task), n, SamplerConfig(max_steps=steps))["validity"]


@metric_check(params=InsertionRatioParams)
def checksum_insertion_ratio(pipeline: Any, n: int = 512) -> float:
    """Mean φ insertion multiplier b_in of the checksum token divided by that of the free digits (< 1: the
    checksum is inserted later; FlexMDM: exactly 1)."""
    return learned_schedule(pipeline.models["model"], n)["ratio"]
