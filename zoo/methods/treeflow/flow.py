"""Flow matching for tables with gradient-boosted trees: ForestFlow (the public baseline) and the
treeflow readings (a single booster over ``(x_t, t)``; boosters warm-started across noise levels).

ForestFlow (Jolicoeur-Martineau, Fatras, Kachman, AISTATS 2024, arXiv 2309.09968, sec. 3;
github.com/SamsungSAILMontreal/ForestDiffusion, ``diffusion_with_trees_class.py``):

* encode the table (:class:`zoo.common.tabular.TabularEncoder`: min-max to ``[-1, 1]``, one-hot
  categoricals), duplicate it ``K`` times and pair every copy with noise ``x_0 ~ N(0, I)``;
* noise levels ``t_i = linspace(eps, 1, n_t)``; at level ``i`` the interpolant is
  ``x_t = t_i x_1 + (1 - t_i) x_0`` and the regression target is the velocity ``x_1 - x_0``
  (conditional flow matching, Lipman et al. 2023, eq. 23 with sigma_min = 0);
* one XGBoost regressor per level (and per class when label-conditional);
* sample by Euler from ``t = 0``: ``x <- x + h v_i(x)``, ``h = 1 / (n_t - 1)``, ``n_t - 1`` steps,
  step ``i`` using the level-``i`` model; then invert the encoding (clip, round, arg-max).

The level-``n_t - 1`` model (``t = 1``) is fitted by the public code but never queried by its Euler
solver; it is not fitted here (samples are unchanged, fit time is not inflated).

treeflow (Ramachandran & Sra, ICML 2026, arXiv 2605.00414) publishes no code; its modes here are the
shared note's readings, **inferred**: ``global`` fits one booster on ``(x_t, t)`` pairs with one
uniformly drawn grid level per duplicated row (one objective over the whole trajectory, GTSM Def 3.1);
``warm_start`` boosts stage-wise along ``t``: level ``i``'s model is level ``i-1``'s trees plus
``warm_trees`` new rounds fitted to its residuals on level-``i`` data (Thm E.22: residuals are scores).

Fitted boosters are run-time artefacts: :func:`registry.artifacts.cached_artifact` keyed by the
configuration, the XGBoost version and the hash of the encoded data and labels, stored as XGBoost's
own UBJSON bytes in a safetensors file (never pickle); ``tree_method=hist`` with ``nthread=1`` and a
fixed seed makes refits byte-identical.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from registry.artifacts import artifact_path, cached_artifact
from zoo.common.boosters import booster_from_bytes as _from_bytes
from zoo.common.boosters import booster_to_bytes as _to_bytes
from zoo.common.tabular import TabularEncoder

Mode = Literal["per_level", "global", "warm_start"]
FORMAT_VERSION = 1
NAMESPACE = "treeflow"


class XGBConfig(BaseModel):
    """ForestDiffusion's XGBoost defaults (``n_estimators`` 100, ``max_depth`` 7, ``eta`` 0.3, λ = α = 0)."""

    model_config = ConfigDict(extra="forbid")
    n_estimators: int = Field(100, ge=1, le=5000)
    max_depth: int = Field(7, ge=1, le=16)
    eta: float = Field(0.3, gt=0, le=1.0)
    reg_lambda: float = Field(0.0, ge=0, le=1e6)
    reg_alpha: float = Field(0.0, ge=0, le=1e6)
    max_bin: int = Field(256, ge=2, le=4096)
    nthread: int = Field(1, ge=1, le=256)


class FlowConfig(BaseModel):
    """Everything that determines the fitted boosters (and so the artefact key)."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode = "per_level"
    n_t: int = Field(50, ge=2, le=1000, description="noise levels (Euler takes n_t - 1 steps)")
    duplicate_K: int = Field(100, ge=1, le=10_000, description="copies of the data, each with its own noise")
    eps: float = Field(1e-3, ge=0, lt=1, description="first noise level")
    label_conditional: bool = True
    global_trees: int = Field(400, ge=1, le=100_000, description="global: boosting rounds of the single booster")
    warm_trees: int = Field(20, ge=1, le=5000, description="warm_start: new rounds per level after the first")
    xgb: XGBConfig = Field(default_factory=XGBConfig)
    seed: int = Field(0, ge=0, le=2**31 - 1)


# ----------------------------------------------------------------------------- the flow pieces
def levels(n_t: int, eps: float) -> np.ndarray:
    """ForestFlow's noise levels ``t_i = linspace(eps, 1, n_t)``."""
    return np.linspace(eps, 1.0, n_t)


def interpolate(x1: np.ndarray, x0: np.ndarray, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Conditional flow matching pair: input ``x_t = t x1 + (1 - t) x0``, target velocity ``x1 - x0``."""
    t = np.asarray(t, dtype=np.float64).reshape(-1, 1) if np.ndim(t) else float(t)
    return t * x1 + (1 - t) * x0, x1 - x0


def euler(x0: np.ndarray, velocity: Callable[[int, float, np.ndarray], np.ndarray], n_t: int) -> np.ndarray:
    """ForestDiffusion's ``euler_solve``: ``n_t - 1`` steps of ``h = 1/(n_t - 1)`` from ``t = 0``,
    step ``i`` calling ``velocity(i, t_i, x)``."""
    h = 1.0 / (n_t - 1)
    x = np.array(x0, dtype=np.float64, copy=True)
    for i in range(n_t - 1):
        x = x + h * velocity(i, i * h, x)
    return x


# ----------------------------------------------------------------------------- boosters
def _params(cfg: FlowConfig) -> dict[str, Any]:
    x = cfg.xgb
    return {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": x.max_depth, "eta": x.eta,
            "lambda": x.reg_lambda, "alpha": x.reg_alpha, "max_bin": x.max_bin, "nthread": x.nthread,
            "seed": cfg.seed, "subsample": 1.0, "verbosity": 0}


def _train(X: np.ndarray, Y: np.ndarray, cfg: FlowConfig, rounds: int, base: Any = None) -> Any:
    import xgboost as xgb

    d = xgb.DMatrix(X, label=Y, nthread=cfg.xgb.nthread)
    return xgb.train(_params(cfg), d, num_boost_round=rounds, xgb_model=base)


def _fit_class(Z: np.ndarray, cfg: FlowConfig, rng: np.random.Generator, progress: Any = None) -> dict[str, np.ndarray]:
    """The boosters of one class as ``{name: ubj bytes}`` (``level{i}`` for per_level, ``global``, ``warm``)."""
    X1 = np.tile(Z, (cfg.duplicate_K, 1))
    X0 = rng.standard_normal(X1.shape)
    ts = levels(cfg.n_t, cfg.eps)
    out: dict[str, np.ndarray] = {}
    if cfg.mode == "global":
        idx = rng.integers(0, cfg.n_t - 1, len(X1))
        xt, v = interpolate(X1, X0, ts[idx])
        out["global"] = _to_bytes(_train(np.column_stack([xt, ts[idx]]), v, cfg, cfg.global_trees))
        return out
    booster = None
    for i in range(cfg.n_t - 1):  # the t = 1 level is never queried by the Euler solver
        xt, v = interpolate(X1, X0, ts[i])
        if cfg.mode == "per_level":
            out[f"level{i}"] = _to_bytes(_train(xt, v, cfg, cfg.xgb.n_estimators))
        else:
            booster = _train(xt, v, cfg, cfg.xgb.n_estimators if booster is None else cfg.warm_trees, booster)
        if progress is not None:
            progress.update(1)
    if booster is not None:
        out["warm"] = _to_bytes(booster)
    return out


def fit_key(Z: np.ndarray, y: np.ndarray | None, cfg: FlowConfig) -> list[Any]:
    """The artefact key: format version, XGBoost version, the configuration and the data itself."""
    import xgboost

    return ["treeflow-fit", FORMAT_VERSION, xgboost.__version__, cfg.model_dump(mode="json"), np.asarray(Z, np.float64),
            None if y is None else np.asarray(y, np.int64)]


@dataclass
class TreeFlow:
    """A fitted tabular flow: ``fit(X, y)`` then ``sample(n)``. ``categorical`` / ``integer`` are column indices of X."""

    config: FlowConfig = field(default_factory=FlowConfig)
    categorical: Sequence[int] = ()
    integer: Sequence[int] = ()
    use_cache: bool = True
    encoder: TabularEncoder | None = field(default=None, init=False)
    classes: np.ndarray | None = field(default=None, init=False)
    class_probs: np.ndarray | None = field(default=None, init=False)
    boosters: list[dict[str, Any]] = field(default_factory=list, init=False)
    fit_seconds: float = field(default=0.0, init=False)

    def fit(self, X: np.ndarray, y: np.ndarray | None = None, progress: bool = False) -> "TreeFlow":
        cfg = self.config
        X = np.asarray(X, dtype=np.float64)
        if y is not None and len(y) != len(X):
            raise ValueError(f"y has {len(y)} rows, X has {len(X)}")
        self.encoder = TabularEncoder(categorical=self.categorical, integer=self.integer).fit(X)
        Z = self.encoder.transform(X)
        if cfg.label_conditional and y is not None:
            self.classes, counts = np.unique(np.asarray(y), return_counts=True)
            self.class_probs = counts / counts.sum()
            groups = [Z[np.asarray(y) == c] for c in self.classes]
            labels = np.searchsorted(self.classes, np.asarray(y))
        else:
            self.classes, self.class_probs, groups, labels = None, None, [Z], None

        def produce() -> dict[str, Any]:
            import torch
            from tqdm.auto import tqdm

            rng = np.random.default_rng(cfg.seed)
            steps = 0 if cfg.mode == "global" else len(groups) * (cfg.n_t - 1)
            bar = tqdm(total=steps, desc=f"fit {cfg.mode}", disable=not progress or steps == 0, leave=False)
            res = {}
            for g, Zg in enumerate(groups):
                for name, arr in _fit_class(Zg, cfg, rng, bar).items():
                    res[f"c{g}/{name}"] = torch.from_numpy(arr)
            bar.close()
            return res

        t0 = time.perf_counter()
        raw = cached_artifact(fit_key(Z, labels, cfg), produce, "safetensors", namespace=NAMESPACE, use_cache=self.use_cache)
        self.fit_seconds = time.perf_counter() - t0
        self.boosters = []
        for g in range(len(groups)):
            self.boosters.append({k.split("/", 1)[1]: _from_bytes(v)
                                  for k, v in raw.items() if k.startswith(f"c{g}/")})
        return self

    def velocity(self, g: int, i: int, t: float, x: np.ndarray) -> np.ndarray:
        """The fitted velocity of class group ``g`` at level ``i`` (time ``t``) on encoded rows ``x``."""
        cfg, b = self.config, self.boosters[g]
        if cfg.mode == "per_level":
            out = b[f"level{i}"].inplace_predict(x)
        elif cfg.mode == "warm_start":
            out = b["warm"].inplace_predict(x, iteration_range=(0, cfg.xgb.n_estimators + i * cfg.warm_trees))
        else:
            ti = levels(cfg.n_t, cfg.eps)[i]
            out = b["global"].inplace_predict(np.column_stack([x, np.full(len(x), ti)]))
        return np.asarray(out, dtype=np.float64).reshape(len(x), -1)

    def sample_encoded(self, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
        """``n`` encoded rows (before rounding) and their labels (drawn from the empirical label law)."""
        if self.encoder is None:
            raise RuntimeError("TreeFlow.sample before fit")
        rng = np.random.default_rng(seed)
        width = self.encoder.width
        if self.classes is None:
            return euler(rng.standard_normal((n, width)), lambda i, t, x: self.velocity(0, i, t, x), self.config.n_t), None
        lab = rng.choice(len(self.classes), size=n, p=self.class_probs)
        Z = np.empty((n, width))
        x0 = rng.standard_normal((n, width))
        for g in range(len(self.classes)):
            m = lab == g
            if m.any():
                Z[m] = euler(x0[m], lambda i, t, x, g=g: self.velocity(g, i, t, x), self.config.n_t)
        return Z, self.classes[lab]

    def sample(self, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
        """``n`` rows of a valid table (clipped, integer columns rounded, one-hot arg-max) and their labels."""
        Z, y = self.sample_encoded(n, seed)
        return self.encoder.inverse_transform(Z), y


def fit_artifact_path(Z: np.ndarray, y: np.ndarray | None, cfg: FlowConfig) -> str:
    """Where the boosters fitted on encoded ``Z`` (labels ``y``) with ``cfg`` are cached."""
    return str(artifact_path(fit_key(Z, y, cfg), "safetensors", NAMESPACE))
