"""Density-and-score estimators as procedures (task ``density-estimation``): DiScoFormer, Scott-rule Gaussian
KDE and score-debiased KDE share one contract,

    out = proc(context=X, queries=Y)        # X (n, d) or (B, n, d) samples; Y (m, d) or (B, m, d) query points
    out.log_density                         # (m,) / (B, m): estimate of log f at Y
    out.score                               # (m, d) / (B, m, d): estimate of grad log f at Y

Each query's answer depends only on the sample set and that query (``batch_independent = True``: the
conformance harness splits the queries into rows and compares). The estimators are deterministic; ``seed``
is accepted and ignored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import torch

from registry.contract import Procedure
from registry.limits import Bound

#: a sample set or query points, ``(n, d)`` or ``(B, n, d)``: at most ``rows`` sets and ``rows`` points per set
Points = Annotated[Any, Bound("rows"), Bound("rows", axis=-2)]
from registry.results import ProcedureOutput

from .data import random_gmm
from .kde import kde_log_density_score, sd_kde
from .model import test_time_train
from .params import DiScoFormerEstimatorParams, EstimatorCli, KDEEstimatorParams, SDKDEEstimatorParams

__all__ = ["DensityScoreOutput", "DiScoFormerEstimator", "KDEEstimator", "SDKDEEstimator", "estimate_errors"]


@dataclass
class DensityScoreOutput(ProcedureOutput):
    """``log_density`` (…, m) and ``score`` (…, m, d) at the query points."""

    log_density: Any = None
    score: Any = None


def estimate_errors(out: DensityScoreOutput, log_f: torch.Tensor, score: torch.Tensor) -> dict[str, float]:
    """``rel_score_mse = E|S_hat - S|^2 / E|S|^2`` and ``log_density_mse = E (T_hat - log f)^2`` (pooled over rows)."""
    ds = ((out.score.double() - score.double()) ** 2).sum(-1).mean()
    return {"rel_score_mse": float(ds / (score.double() ** 2).sum(-1).mean()),
            "log_density_mse": float(((out.log_density.double() - log_f.double()) ** 2).mean())}


class _Estimator(Procedure):
    kind = "estimator"
    batch_independent = True
    default_dim = 2

    CliInputs = EstimatorCli

    def dim(self) -> int:
        return self.default_dim

    def estimate(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # pragma: no cover
        raise NotImplementedError

    def __call__(self, *, seed: int = 0, context: Points = None, queries: Points = None) -> DensityScoreOutput:
        if context is None or queries is None:
            raise ValueError(f"{type(self).__name__} needs context= (n, d) samples and queries= (m, d) points")
        X, Y = torch.as_tensor(context), torch.as_tensor(queries)
        if X.ndim not in (2, 3) or Y.ndim != X.ndim or X.shape[-1] != Y.shape[-1] or X.shape[:-2] != Y.shape[:-2]:
            raise ValueError(f"context must be (n, d) or (B, n, d) and queries (m, d) or (B, m, d) with the same d and B; "
                             f"got {tuple(X.shape)} and {tuple(Y.shape)}")
        if X.shape[-2] < 2:
            raise ValueError(f"context needs at least 2 samples (got {X.shape[-2]})")
        with torch.no_grad():
            log_f, score = self.estimate(X, Y)
        return DensityScoreOutput(log_density=log_f, score=score)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        g = torch.Generator().manual_seed(1234)
        law = random_gmm(self.dim(), g, k_max=3)
        return {"context": law.sample(64, g), "queries": law.sample(batch_size, g)}

    def input_rows(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        Y = inputs["queries"]
        return [{"context": inputs["context"], "queries": Y[..., i:i + 1, :]} for i in range(Y.shape[-2])]

    def output_rows(self, outputs: DensityScoreOutput) -> list[DensityScoreOutput]:
        m = outputs.log_density.shape[-1]
        return [DensityScoreOutput(log_density=outputs.log_density[..., i:i + 1], score=outputs.score[..., i:i + 1, :]) for i in range(m)]

    def run_cli(self, inputs: Any, seed: int) -> str:
        ci = inputs if inputs is not None else self.CliInputs()
        g = torch.Generator().manual_seed(ci.mixture_seed)
        law = random_gmm(self.dim(), g)
        X, Y = law.sample(ci.n_context, g), law.sample(ci.n_query, g)
        err = estimate_errors(self(context=X, queries=Y), law.log_prob(Y), law.score(Y, 0.0))
        return (f"{type(self).__name__} on a random {law.num_components}-component mixture in d={law.dim} "
                f"(seed {ci.mixture_seed}), {ci.n_context} samples, {ci.n_query} queries: relative score MSE "
                f"{err['rel_score_mse']:.4f}, log-density MSE {err['log_density_mse']:.4f}")


class DiScoFormerEstimator(_Estimator):
    """DiScoFormer (arXiv 2511.05924): one forward pass of the trained set transformer (role ``estimator``),
    in the model's dtype (float32 weights; float64 if the pipeline was loaded with ``dtype=float64``).
    ``ttt_steps > 0``: first adapt a private copy to the context by test-time training
    (:func:`zoo.methods.discoformer.model.test_time_train`); the cached model is never changed."""

    Params = DiScoFormerEstimatorParams

    def dim(self) -> int:
        return int(self.models["estimator"].dim)

    def estimate(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        model = self.models["estimator"]
        p = next(model.parameters())
        X, Y = X.to(p.dtype).to(p.device), Y.to(p.dtype).to(p.device)
        if self.params.ttt_steps and X.ndim == 3:  # one adapted copy per task
            outs = [self._forward(test_time_train(model, X[b], self.params.ttt_steps, self.params.ttt_lr)[0], X[b], Y[b]) for b in range(X.shape[0])]
            return torch.stack([a for a, _ in outs]), torch.stack([b for _, b in outs])
        if self.params.ttt_steps:
            model = test_time_train(model, X, self.params.ttt_steps, self.params.ttt_lr)[0]
        return self._forward(model, X, Y)

    def _forward(self, model: Any, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.params.max_query_chunk
        parts = [model(X, Y[..., i:i + c, :]) for i in range(0, Y.shape[-2], c)]
        return torch.cat([a for a, _ in parts], -1), torch.cat([b for _, b in parts], -2)


class KDEEstimator(_Estimator):
    """Gaussian KDE with kernel covariance ``h^2 cov(X)`` (scipy's ``gaussian_kde`` convention with a
    ``1/n`` covariance), ``h`` = Scott's factor ``n^{-1/(d+4)}`` unless ``factor`` is given."""

    Params = KDEEstimatorParams

    def dim(self) -> int:
        return self.params.dim

    def estimate(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return kde_log_density_score(X.double(), Y.double(), self.params.factor, self.params.eps)


class SDKDEEstimator(_Estimator):
    """Score-debiased KDE (:func:`zoo.methods.discoformer.kde.sd_kde`): samples moved by ``(h^2/2) cov(X) s(x_j)``,
    then KDE with bandwidth ``n^{-1/(d+8)}``. ``score_source="kde"``: the Scott-rule KDE's own score (no oracle);
    ``"discoformer"``: DiScoFormer's score at the samples (the paper's plug-in use; needs role ``estimator``)."""

    Params = SDKDEEstimatorParams

    def dim(self) -> int:
        return int(self.models["estimator"].dim) if self.params.score_source == "discoformer" else self.params.dim

    def estimate(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = None
        if self.params.score_source == "discoformer":
            model = self.models["estimator"]
            dt = next(model.parameters()).dtype
            s = model(X.to(dt), X.to(dt))[1].double()
        return sd_kde(X.double(), Y.double(), s, self.params.factor, eps=self.params.eps)
