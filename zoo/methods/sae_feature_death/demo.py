"""The authors' synthetic demo (github.com/ElanaPearl/sae-feature-death ``demo.ipynb``, commit
de28de0), re-implemented from its description so that the published numbers can be checked:

* data: d = 64, 128 random unit ground-truth features, 10,000 samples, each with 5 distinct
  active features (coefficients |N(0, 1)|), plus 0.1 N(0, 1) noise, plus 50 on dimension 0;
  drawn with NumPy's legacy global generator seeded 42 in the notebook's order (features, then
  per sample the active set and its coefficients, then the noise) -> gamma 21.5, effective rank 51.7;
* SAE: TopK 64 -> 256, k = 5, the standard init after ``torch.manual_seed(0)``
  (:class:`zoo.common.sae.SparseAutoencoder` with ``dec_init="uniform"``, ``seed=0``);
* published table: standard init dead-by-ReLU 40.2 %, dead-by-TopK 51.2 %, total 91.4 %
  (103 / 131 / 234 of 256); b_dec = geometric median 0 %; PCA whitening 0 %.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["PUBLISHED", "demo_activations", "demo_table"]

#: The notebook's printed counts (of 256 features): standard init, + centring, + PCA whitening.
PUBLISHED = {"standard": (103, 131, 234), "geometric_median": (0, 0, 0), "pca_whiten": (0, 0, 0)}


def demo_activations(seed: int = 42, n_samples: int = 10_000, d: int = 64, n_true: int = 128,
                     n_active: int = 5, noise: float = 0.1, outlier: float = 50.0) -> torch.Tensor:
    """The demo's activations (float32 ``(n_samples, d)``), same random stream as the notebook."""
    rs = np.random.RandomState(seed)
    feats = rs.randn(n_true, d)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    coef = np.zeros((n_samples, n_true))
    for i in range(n_samples):
        act = rs.choice(n_true, size=n_active, replace=False)
        coef[i, act] = np.abs(rs.randn(n_active))
    x = coef @ feats + rs.randn(n_samples, d) * noise
    x[:, 0] += outlier
    return torch.tensor(x, dtype=torch.float32)


def demo_table(dec_init: str = "uniform", sae_seed: int = 0, x: torch.Tensor | None = None) -> dict[str, Any]:
    """Dead-feature counts (ReLU, TopK, total of 256) for the demo's three conditions, plus gamma
    and effective rank of the data. ``dec_init="uniform"`` is the authors' init."""
    from zoo.common.sae import SparseAutoencoder

    from . import diagnostics as dg

    x = demo_activations() if x is None else x
    out: dict[str, Any] = {"gamma": dg.gamma(x), "effective_rank": dg.effective_rank(x)}

    def counts(sae: SparseAutoencoder, data: torch.Tensor) -> tuple[int, int, int]:
        r, t = dg.dead_masks(sae, data)
        return int(r.sum()), int(t.sum()), int(r.sum() + t.sum())

    sae = SparseAutoencoder(64, 256, "topk", 5, seed=sae_seed, dec_init=dec_init)  # type: ignore[arg-type]
    out["standard"] = counts(sae, x)
    sae.set_b_dec_init(x, "geometric_median")
    out["geometric_median"] = counts(sae, x)
    sae.set_b_dec_init(x, "zeros")
    xw, _ = dg.preprocess(x, "pca_whiten")
    out["pca_whiten"] = counts(sae, xw)
    return out
