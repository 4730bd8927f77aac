"""Procedures of the ``sae-feature-death`` spec: the init-death report (analysis, default) and the
training-dynamics recipe, on a real model's activations.

Simon, Adams & Zou, ICML 2026, arXiv 2605.31518 (code github.com/ElanaPearl/sae-feature-death).
The report reproduces the paper's central experiment at CPU scale: collect a layer's activations,
inject a dimension-level outlier of magnitude m (x[:, dim] += m) to control gamma, and measure
dead-by-ReLU / dead-by-TopK at the standard init (b_dec = 0) against the closed forms
Phi(-C/gamma) and Phi(t_k - C/gamma) (§4.4), and after each preprocessing fix (mean /
geometric-median centring, PCA whitening; per-token LayerNorm as the negative control).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import torch
from pydantic import Field

from registry.contract import Procedure
from registry.limits import Bound

# per-call inputs that override a parameter take the parameter's bounds
Texts = Annotated[list[str], Bound("rows"), Bound("length", "longest")]
Magnitudes = Annotated[list[float], Field(min_length=1, max_length=32)]
Names = Annotated[list[str], Field(max_length=1024)]
Tokens = Annotated[int, Field(ge=64, le=10_000_000)]
NFeatures = Annotated[int, Field(ge=8, le=262_144)]
TopK = Annotated[int, Field(ge=1, le=4096)]
from registry.results import ProcedureOutput
from zoo.common.activations import collect_activations
from zoo.common.sae import SparseAutoencoder, TrainConfig, fraction_variance_unexplained, train_sae

from . import diagnostics as dg
from .params import (DEFAULT_MAGNITUDES, CentredTrainingParams, FeatureDeathReportCli,  # noqa: F401
                     FeatureDeathReportParams, StreamSurveyParams)


def _default_texts(n_docs: int) -> list[str]:
    from zoo.common.corpus import lee_background

    return lee_background(n_docs)


def _inject(x: torch.Tensor, m: float, dim: int) -> torch.Tensor:
    """Dimension-level outlier: add ``m`` to coordinate ``dim`` of every token."""
    y = x.clone()
    y[:, dim] += m
    return y


@dataclass
class FeatureDeathOutput(ProcedureOutput):
    """What :class:`FeatureDeathReport` returns (attribute, key and index access, ``to_tuple()``).

    * ``rows`` -- one dict per injected magnitude: ``m``, ``gamma`` (post-LayerNorm outlier ratio),
      ``gamma_raw``, ``effective_rank``, ``dead_relu`` / ``dead_topk`` / ``dead_total`` at
      ``b_dec = 0``, ``pred_relu`` / ``pred_total`` (closed forms Phi(-C/gamma), Phi(t_k - C/gamma),
      paper §4.4) and ``dead_total_<prep>`` after each preprocessing;
    * ``n_tokens`` -- evaluation tokens N; ``d`` -- activation width; ``layer`` -- hidden_states index;
    * ``config`` -- ``n_features``, ``k``, ``outlier_dim``, ``preprocessings``.
    """

    rows: list[dict[str, Any]]
    n_tokens: int
    d: int
    layer: int
    config: dict[str, Any]


@dataclass
class StreamSurveyOutput(ProcedureOutput):
    """What :class:`StreamSurvey` returns (attribute, key and index access, ``to_tuple()``).

    * ``rows`` -- one dict per stream: ``stream``, ``d``, ``gamma``, ``gamma_raw``, ``effective_rank``,
      ``dead_relu`` / ``dead_topk`` / ``dead_total``, ``pred_relu`` / ``pred_total`` and
      ``dead_total_<prep>`` per preprocessing;
    * ``n_tokens`` -- tokens per stream; ``config`` -- ``n_features``, ``k``, ``preprocessings``;
    * ``spearman_total`` / ``spearman_relu`` -- Spearman(gamma, total / dead-by-ReLU init death) over
      the streams, or ``None`` (then not a key) when undefined (fewer than 3 streams or a constant column).
    """

    rows: list[dict[str, Any]]
    n_tokens: int
    config: dict[str, Any]
    spearman_total: float | None = None
    spearman_relu: float | None = None


@dataclass
class CentredTrainingOutput(ProcedureOutput):
    """What :class:`CentredTraining` returns (attribute, key and index access, ``to_tuple()``).

    * ``rows`` -- one dict per (magnitude, ``b_dec`` init): ``m``, ``gamma``, ``b_dec_init``,
      ``dead_init``, ``dead_final``, ``dead_final_relu``, ``fvu``, ``b_dec_rel_dist``, ``max_dec_norm_err``;
    * ``config`` -- ``n_train``, ``n_eval``, ``n_features``, ``k``, ``steps``, ``lr``.
    """

    rows: list[dict[str, Any]]
    config: dict[str, Any]


class FeatureDeathReport(Procedure):
    """Init death vs gamma on real activations, measured and predicted (the paper's Fig. 1/2 at CPU scale).

    Returns a :class:`FeatureDeathOutput`: ``rows`` (one per magnitude: m, gamma, gamma_raw, effective
    rank, dead-by-ReLU / dead-by-TopK / total at b_dec = 0, total dead after each preprocessing,
    predicted ReLU / total death), ``n_tokens``, ``d``, ``layer`` and ``config``.
    """

    kind = "analysis"

    Params = FeatureDeathReportParams
    CliInputs = FeatureDeathReportCli

    def _acts(self, texts: list[str] | None, layer: int, max_tokens: int) -> torch.Tensor:
        p = self.params
        texts = texts if texts is not None else _default_texts(p.n_docs)
        key = (tuple(texts), layer, max_tokens, p.max_length)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache.clear()
            cache[key] = collect_activations(
                self.models["encoder"], texts, layer=layer, max_length=p.max_length, max_tokens=max_tokens
            )
        return cache[key]

    def __call__(self, *, seed: int = 0, texts: Texts | None = None, magnitudes: Magnitudes | None = None,
                 max_tokens: Tokens | None = None, n_features: NFeatures | None = None, k: TopK | None = None,
                 layer: Annotated[int, Field(ge=0, le=128)] | None = None, preprocessings: Names | None = None,
                 progress: bool = False) -> FeatureDeathOutput:
        p = self.params
        layer = p.layer if layer is None else layer
        max_tokens = p.max_tokens if max_tokens is None else max_tokens
        F = p.n_features if n_features is None else n_features
        kk = p.k if k is None else k
        mags = list(p.magnitudes if magnitudes is None else magnitudes)
        preps = list(p.preprocessings if preprocessings is None else preprocessings)
        x0 = self._acts(texts, layer, max_tokens)
        n, d = x0.shape
        if p.outlier_dim >= d:
            raise ValueError(f"outlier_dim {p.outlier_dim} >= d = {d}")
        # one SAE init per call: the seed picks it (the paper's standard init, b_dec = 0)
        sae = SparseAutoencoder(d, F, "topk", kk, seed=p.sae_seed + seed, dec_init=p.dec_init)
        rows = []
        it = mags
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(mags, desc="magnitudes")
        for m in it:
            x = _inject(x0, m, p.outlier_dim)
            g = dg.gamma(x)
            sae.center.zero_()
            base = dg.dead_by_pathway(sae, x)
            row = {
                "m": float(m),
                "gamma": g,
                "gamma_raw": dg.gamma(x, post_ln=False),
                "effective_rank": dg.effective_rank(x),
                "dead_relu": base.relu,
                "dead_topk": base.topk,
                "dead_total": base.total,
                "pred_relu": dg.predicted_dead_by_relu(g, n),
                "pred_total": dg.predicted_dead_by_topk(g, n, kk, F),
            }
            for prep in preps:
                xp, _ = dg.preprocess(x, prep, seed=seed)  # type: ignore[arg-type]
                row[f"dead_total_{prep}"] = dg.dead_by_pathway(sae, xp).total
            rows.append(row)
        return FeatureDeathOutput(rows=rows, n_tokens=n, d=d, layer=layer,
                                  config={"n_features": F, "k": kk, "outlier_dim": p.outlier_dim, "preprocessings": preps})

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"texts": _default_texts(6), "magnitudes": [0.0, 40.0], "max_tokens": 512, "n_features": 256,
                "k": 8, "preprocessings": ["mean"]}

    def run_cli(self, inputs: Any, seed: int) -> str:
        kw: dict[str, Any] = {"progress": True}
        out = "sae-feature-death.png"
        if inputs is not None:
            out = inputs.out
            if inputs.layer is not None:
                kw["layer"] = inputs.layer
            if inputs.max_tokens is not None:
                kw["max_tokens"] = inputs.max_tokens
            if inputs.magnitudes:
                kw["magnitudes"] = [float(v) for v in inputs.magnitudes.split(",")]
        rep = self(seed=seed, **kw)
        plot_report(rep, out)
        return format_report(rep) + f"\nplot: {out}"


def cached_streams(encoder: Any, texts: list[str], modules: list[str], *, max_length: int = 128,
                   max_tokens: int | None = None, use_cache: bool = True, progress: bool = False) -> dict[str, torch.Tensor]:
    """:func:`zoo.common.activations.collect_streams`, cached as an engine cache entry
    (:func:`registry.artifacts.cached_artifact`: safetensors, content-hashed, written atomically under a
    unique temp name) in the ``sae-feature-death`` namespace, keyed by texts, encoder, modules and token
    budget. A file rewritten on disk is detected and the streams recomputed."""
    from registry.contract import cached_artifact
    from zoo.common.activations import collect_streams

    ident = getattr(encoder, "path", None) or getattr(getattr(encoder, "config", None), "_name_or_path", "") or type(encoder).__name__

    def produce() -> dict[str, torch.Tensor]:
        acts = collect_streams(encoder, texts, modules, max_length=max_length, max_tokens=max_tokens, progress=progress)
        return {k: v.contiguous() for k, v in acts.items()}

    key = ["streams", 2, str(ident), max_length, max_tokens or -1, list(modules), list(texts)]
    return cached_artifact(key, produce, "safetensors", namespace="sae-feature-death", use_cache=use_cache)


class StreamSurvey(Procedure):
    """Real outliers, no injection: gamma and init death on every sub-layer output of the encoder
    (the paper's Fig. 2 protocol on one model's 37 streams instead of 454 model-layers).

    For each stream (forward hooks, :func:`zoo.common.activations.bert_sublayer_streams`):
    gamma (post-LN) and gamma_raw, effective rank, dead-by-ReLU / dead-by-TopK at the standard
    init (b_dec = 0), the closed-form predictions, and total death after mean-centring and after
    PCA whitening. Returns a :class:`StreamSurveyOutput`: ``rows`` and the Spearman correlations of gamma with init death
    (``spearman_total``, ``spearman_relu``; the paper: 0.89 / 0.82 across 454 model-layers;
    ``None``, and then not a key, where undefined, e.g. when no stream has a dead-by-ReLU feature)."""

    kind = "analysis"

    Params = StreamSurveyParams

    def _streams(self) -> list[str]:
        if self.params.streams is not None:
            return list(self.params.streams)
        from zoo.common.activations import bert_sublayer_streams

        net = self.models["encoder"]
        net = getattr(net, "model", net)
        return bert_sublayer_streams(int(net.config.num_hidden_layers))

    def __call__(self, *, seed: int = 0, texts: Texts | None = None, streams: Names | None = None,
                 max_tokens: Tokens | None = None, n_features: NFeatures | None = None, k: TopK | None = None,
                 preprocessings: Names | None = None, use_cache: bool = True, progress: bool = False) -> StreamSurveyOutput:
        from scipy.stats import spearmanr

        p = self.params
        texts = texts if texts is not None else _default_texts(p.n_docs)
        mods = list(streams) if streams is not None else self._streams()
        n_tok = p.max_tokens if max_tokens is None else max_tokens
        F = p.n_features if n_features is None else n_features
        kk = p.k if k is None else k
        preps = list(p.preprocessings if preprocessings is None else preprocessings)
        acts = cached_streams(self.models["encoder"], texts, mods, max_length=p.max_length, max_tokens=n_tok,
                              use_cache=use_cache, progress=progress)
        rows = []
        it = mods
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(mods, desc="streams")
        for name in it:
            x = acts[name]
            n, d = x.shape
            sae = SparseAutoencoder(d, F, "topk", kk, seed=p.sae_seed + seed, dec_init=p.dec_init)
            g = dg.gamma(x)
            base = dg.dead_by_pathway(sae, x)
            row = {"stream": name, "d": d, "gamma": g, "gamma_raw": dg.gamma(x, post_ln=False),
                   "effective_rank": dg.effective_rank(x), "dead_relu": base.relu, "dead_topk": base.topk,
                   "dead_total": base.total, "pred_relu": dg.predicted_dead_by_relu(g, n),
                   "pred_total": dg.predicted_dead_by_topk(g, n, kk, F)}
            for prep in preps:
                xp, _ = dg.preprocess(x, prep, seed=seed)  # type: ignore[arg-type]
                row[f"dead_total_{prep}"] = dg.dead_by_pathway(sae, xp).total
            rows.append(row)
        gs = [r["gamma"] for r in rows]

        def rho(col: str) -> float | None:
            ys = [r[col] for r in rows]
            if len(rows) < 3 or len(set(ys)) < 2 or len(set(gs)) < 2:
                return None  # undefined: e.g. no stream has a dead-by-ReLU feature
            return float(spearmanr(gs, ys).statistic)

        return StreamSurveyOutput(rows=rows, n_tokens=int(acts[mods[0]].shape[0]),
                                  config={"n_features": F, "k": kk, "preprocessings": preps},
                                  spearman_total=rho("dead_total"), spearman_relu=rho("dead_relu"))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"texts": _default_texts(4), "streams": ["embeddings", "encoder.layer.0.output.dense", "encoder.layer.0.output"],
                "max_tokens": 256, "n_features": 64, "k": 4, "preprocessings": ["mean"], "use_cache": False}

    def run_cli(self, inputs: Any, seed: int) -> str:
        return format_survey(self(seed=seed, progress=True))


def format_survey(rep: dict[str, Any]) -> str:
    """A plain-text table of a :class:`StreamSurvey` result (percentages)."""
    preps = rep["config"]["preprocessings"]
    lines = [f"SAE init death on every sub-layer stream, {rep['n_tokens']} tokens each, TopK F={rep['config']['n_features']} "
             f"k={rep['config']['k']}, standard init (b_dec = 0); last columns: total dead after each preprocessing",
             f"{'stream':36s} | {'d':>4} | {'gamma':>6} | {'g_raw':>6} | {'erank':>6} | {'ReLU%':>5} | {'TopK%':>5} | "
             f"{'total%':>6} | {'pred%':>5} | " + " | ".join(f"{p:>10}%" for p in preps)]
    for r in rep["rows"]:
        lines.append(f"{r['stream']:36s} | {r['d']:4d} | {r['gamma']:6.2f} | {r['gamma_raw']:6.2f} | {r['effective_rank']:6.1f} | "
                     f"{100 * r['dead_relu']:5.1f} | {100 * r['dead_topk']:5.1f} | {100 * r['dead_total']:6.1f} | "
                     f"{100 * r['pred_total']:5.1f} | " + " | ".join(f"{100 * r[f'dead_total_{p}']:10.1f} " for p in preps))
    def fmt(v: float | None) -> str:
        return "undefined (constant)" if v is None else f"{v:.3f}"

    lines.append(f"Spearman(gamma, init death) over {len(rep['rows'])} streams: total {fmt(rep.get('spearman_total'))}, "
                 f"ReLU {fmt(rep.get('spearman_relu'))} (paper, 454 model-layers: 0.89 TopK / 0.82 ReLU)")
    return "\n".join(lines)


def format_report(rep: dict[str, Any]) -> str:
    """A plain-text table of a :class:`FeatureDeathReport` result (percentages)."""
    rows = rep["rows"]
    preps = rep["config"]["preprocessings"]
    head = ["m", "gamma", "g_raw", "eff_rank", "ReLU%", "TopK%", "total%", "pred ReLU%", "pred total%"] + [f"{p}%" for p in preps]
    lines = [
        f"SAE init death on layer {rep['layer']} activations, {rep['n_tokens']} tokens, d={rep['d']}, "
        f"TopK F={rep['config']['n_features']} k={rep['config']['k']}, outlier +m on dim {rep['config']['outlier_dim']}",
        "columns ReLU/TopK/total: standard init (b_dec = 0); pred: Phi(-C/g), Phi(t_k - C/g); "
        "last columns: total dead after each preprocessing",
        " | ".join(f"{h:>9}" for h in head),
    ]
    for r in rows:
        vals = [f"{r['m']:9.0f}", f"{r['gamma']:9.2f}", f"{r['gamma_raw']:9.2f}", f"{r['effective_rank']:9.1f}"]
        vals += [f"{100 * r[c]:9.1f}" for c in ("dead_relu", "dead_topk", "dead_total", "pred_relu", "pred_total")]
        vals += [f"{100 * r[f'dead_total_{p}']:9.1f}" for p in preps]
        lines.append(" | ".join(vals))
    return "\n".join(lines)


def plot_report(rep: dict[str, Any], path: str | Path) -> Path:
    """PNG: measured and predicted death against gamma (log axis), plus the preprocessing fixes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rep["rows"]
    cfg = rep["config"]
    n, F, k = rep["n_tokens"], cfg["n_features"], cfg["k"]
    gs = [max(r["gamma"], 1e-3) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    grid = [10 ** (x / 50) for x in range(-60, 101)]
    ax.plot(grid, [100 * dg.predicted_dead_by_topk(g, n, k, F) for g in grid], "C0--", lw=1, label="predicted total Φ(t_k−C/γ)")
    ax.plot(grid, [100 * dg.predicted_dead_by_relu(g, n) for g in grid], "C1--", lw=1, label="predicted ReLU Φ(−C/γ)")
    ax.plot(gs, [100 * r["dead_total"] for r in rows], "C0o-", label="measured total (b_dec = 0)")
    ax.plot(gs, [100 * r["dead_relu"] for r in rows], "C1s-", label="measured dead-by-ReLU")
    for i, p in enumerate(cfg["preprocessings"]):
        ax.plot(gs, [100 * r[f"dead_total_{p}"] for r in rows], marker="x", ls=":", color=f"C{i + 2}", label=f"total, {p}")
    ax.set_xscale("log")
    ax.set_xlabel("outlier severity γ = ‖μ‖/‖σ‖ (post-LN)")
    ax.set_ylabel("dead features at init (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(f"SAE feature death vs γ: layer {rep['layer']}, N={n}, F={F}, k={k}")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


class CentredTraining(Procedure):
    """Training dynamics (paper §4.7): TopK SAEs trained from b_dec = 0 vs b_dec = mean on the same
    activations at several outlier magnitudes; reports final dead %, FVU, and how far b_dec is
    from the data mean (||b_dec - mu|| / ||mu||) at the end. The paper's claim: at high gamma the
    b_dec = 0 SAE keeps most features dead because b_dec does not learn mu in a realistic budget,
    while centring removes the death without auxiliary losses. ``b_dec_inits`` may include
    ``"zeros+auxk"``: b_dec = 0 with the AuxK loss (Gao et al. 2024; coefficient 1/32, k_aux = d/2),
    the auxiliary-loss fix the paper compares against; a latent counts as dead for AuxK after
    ``auxk_dead_tokens`` tokens (25,600 = 100 steps, scaled down from the reference 10M to the CPU budget).
    Returns a :class:`CentredTrainingOutput` (``rows``, ``config``)."""

    kind = "training"

    Params = CentredTrainingParams

    def __call__(self, *, seed: int = 0, texts: Texts | None = None, magnitudes: Magnitudes | None = None,
                 steps: Annotated[int, Field(ge=1, le=1_000_000)] | None = None, n_train: Tokens | None = None,
                 n_eval: Tokens | None = None, n_features: NFeatures | None = None, k: TopK | None = None,
                 b_dec_inits: Annotated[list[str], Field(min_length=1, max_length=8)] | None = None,
                 progress: bool = False) -> CentredTrainingOutput:
        p = self.params
        texts = texts if texts is not None else _default_texts(p.n_docs)
        ntr = p.n_train if n_train is None else n_train
        nev = p.n_eval if n_eval is None else n_eval
        x_all = collect_activations(self.models["encoder"], texts, layer=p.layer, max_length=p.max_length,
                                    max_tokens=ntr + nev)
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(x_all.shape[0], generator=g)
        x_tr0, x_ev0 = x_all[perm[:ntr]], x_all[perm[ntr : ntr + nev]]
        F = p.n_features if n_features is None else n_features
        kk = p.k if k is None else k
        rows = []
        for m in (p.magnitudes if magnitudes is None else magnitudes):
            x_tr, x_ev = _inject(x_tr0, m, p.outlier_dim), _inject(x_ev0, m, p.outlier_dim)
            for how in (p.b_dec_inits if b_dec_inits is None else b_dec_inits):
                base, _, extra = how.partition("+")
                sae = SparseAutoencoder(x_tr.shape[1], F, "topk", kk, seed=seed, dec_init=p.dec_init)
                sae.set_b_dec_init(x_tr, base)  # type: ignore[arg-type]
                init = dg.dead_by_pathway(sae, x_ev)
                cfg = TrainConfig(steps=p.steps if steps is None else steps, batch_size=p.batch_size, lr=p.lr,
                                  b_dec_init=base, auxk_alpha=p.auxk_alpha if extra == "auxk" else 0.0,  # type: ignore[arg-type]
                                  dead_tokens=p.auxk_dead_tokens, seed=seed, progress=progress,
                                  desc=f"m={m:g} b_dec={how}")
                hist = train_sae(sae, x_tr, cfg)
                fin = dg.dead_by_pathway(sae, x_ev)
                rows.append({"m": float(m), "gamma": dg.gamma(x_tr), "b_dec_init": how, "dead_init": init.total,
                             "dead_final": fin.total, "dead_final_relu": fin.relu, "fvu": fraction_variance_unexplained(sae, x_ev),
                             "b_dec_rel_dist": hist.b_dec_rel_dist[-1], "max_dec_norm_err": hist.max_dec_norm_err})
        return CentredTrainingOutput(rows=rows, config={"n_train": ntr, "n_eval": nev, "n_features": F, "k": kk,
                                                        "steps": p.steps if steps is None else steps, "lr": p.lr})

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"texts": _default_texts(4), "magnitudes": [40.0], "steps": 5, "n_train": 256, "n_eval": 128,
                "n_features": 64, "k": 4}

    def run_cli(self, inputs: Any, seed: int) -> str:
        rep = self(seed=seed, progress=True)
        lines = ["    m |  gamma | b_dec init | dead init % | dead final % |   FVU | ||b_dec-mu||/||mu||"]
        for r in rep["rows"]:
            lines.append(f"{r['m']:5.0f} | {r['gamma']:6.2f} | {r['b_dec_init']:>10} | {100 * r['dead_init']:11.1f} | "
                         f"{100 * r['dead_final']:12.1f} | {r['fvu']:5.3f} | {r['b_dec_rel_dist']:.3f}")
        return "\n".join(lines)

