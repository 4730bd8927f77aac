"""dsmtree (Ramachandran & Sra, ICML 2026, arXiv 2605.00414; no public code): distil a tree ensemble's
decision logic into an MLP through the score / trajectory view. Every student objective except the two
baselines is an **[inferred]** reading of the shared note (``methods/treeflow.md`` §4.3):

* ``hard`` (baseline): the MLP trained on the hard labels (binary cross-entropy);
* ``kd`` (baseline): plain knowledge distillation, BCE to the teacher's probability at the clean points
  (Hinton et al. 2015 with temperature 1);
* ``dsm-trajectory`` [inferred]: points are noised along the forward trajectory x̃ = x + σ ε (σ from a grid,
  σ = 0 included), the student sees (x̃, σ) and regresses the teacher **at x̃** (the teacher is queried along
  the noising paths, so its boundaries are sampled densely); σ = 0 at test time;
* ``dsm-clean`` [inferred]: the note's literal denoising reading: input (x̃, σ), target the teacher at the
  **clean** x (denoising score matching, Vincent 2011, applied to the teacher's output).

Task: an axis-aligned XOR of thresholds, y = ⊕_{j<k} 1[x_j > θ_j] on x ~ U[0, 1]^d (trees find it by axis
splits; an MLP trained on few hard labels smooths it). The teacher (XGBoost, ``hist``, one thread, seeded) is
a run-time artefact (:func:`registry.artifacts.cached_artifact`, UBJSON bytes in safetensors).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import torch

from registry.artifacts import cached_artifact
from zoo.common.boosters import booster_from_bytes, booster_to_bytes

Mode = Literal["hard", "kd", "dsm-trajectory", "dsm-clean"]
THRESHOLDS = (0.3, 0.5, 0.7)


def xor_task(n: int, seed: int, d: int = 6, thresholds: Sequence[float] = THRESHOLDS) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points uniform on [0, 1]^d and their label: the parity of ``x_j > θ_j`` over the first len(θ) axes."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d)).astype(np.float32)
    th = np.asarray(thresholds, dtype=np.float32)
    return X, ((X[:, : len(th)] > th).sum(1) % 2).astype(np.float32)


def fit_teacher(X: np.ndarray, y: np.ndarray, n_estimators: int = 300, max_depth: int = 4, eta: float = 0.1, seed: int = 0,
                use_cache: bool = True) -> Any:
    """An XGBoost classifier (``binary:logistic``, hist, one thread), cached by data and configuration."""
    import xgboost as xgb

    params = {"objective": "binary:logistic", "tree_method": "hist", "max_depth": max_depth, "eta": eta, "nthread": 1,
              "seed": seed, "verbosity": 0}

    def produce() -> dict[str, torch.Tensor]:
        b = xgb.train(params, xgb.DMatrix(X, label=y, nthread=1), num_boost_round=n_estimators)
        return {"teacher": torch.from_numpy(booster_to_bytes(b))}

    raw = cached_artifact(["dsmtree-teacher", 1, xgb.__version__, params, n_estimators, np.asarray(X), np.asarray(y)],
                          produce, "safetensors", namespace="dsmtree", use_cache=use_cache)
    return booster_from_bytes(raw["teacher"])


def teacher_prob(teacher: Any, X: np.ndarray) -> np.ndarray:
    return np.asarray(teacher.inplace_predict(np.asarray(X, dtype=np.float32)), dtype=np.float32)


def student(d: int, width: int = 64) -> torch.nn.Module:
    """The MLP student: (x, σ) -> logit, two SiLU hidden layers."""
    return torch.nn.Sequential(torch.nn.Linear(d + 1, width), torch.nn.SiLU(), torch.nn.Linear(width, width), torch.nn.SiLU(),
                               torch.nn.Linear(width, 1))


def batch_targets(mode: Mode, x: np.ndarray, y: np.ndarray, p_clean: np.ndarray, teacher: Any, sigma: np.ndarray,
                  noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Student inputs ``[x̃, σ]`` and BCE targets for one batch (``sigma`` per row; ignored by hard / kd)."""
    if mode in ("hard", "kd"):
        return np.column_stack([x, np.zeros(len(x), np.float32)]), (y if mode == "hard" else p_clean)
    xt = (x + sigma[:, None] * noise).astype(np.float32)
    tgt = teacher_prob(teacher, xt) if mode == "dsm-trajectory" else p_clean
    return np.column_stack([xt, sigma]).astype(np.float32), tgt


@dataclass
class StudentRun:
    net: torch.nn.Module
    losses: list[float]


def train_student(mode: Mode, X: np.ndarray, y: np.ndarray, teacher: Any, steps: int = 3000, batch: int = 256, lr: float = 1e-3,
                  sigmas: Sequence[float] = (0.0, 0.02, 0.05, 0.1, 0.2), width: int = 64, seed: int = 0, progress: bool = False) -> StudentRun:
    """Adam on BCE-with-logits for ``steps`` minibatches (seeded: torch and numpy generators from ``seed``)."""
    from tqdm.auto import tqdm

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = student(X.shape[1], width)
    opt = torch.optim.Adam(net.parameters(), lr)
    p_clean = teacher_prob(teacher, X)
    sig = np.asarray(sigmas, dtype=np.float32)
    losses = []
    for _ in tqdm(range(steps), desc=f"student {mode}", disable=not progress, leave=False):
        i = rng.integers(0, len(X), batch)
        s = sig[rng.integers(0, len(sig), batch)]
        noise = rng.standard_normal((batch, X.shape[1])).astype(np.float32)
        inp, tgt = batch_targets(mode, X[i], y[i], p_clean[i], teacher, s, noise)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(torch.from_numpy(inp)).squeeze(1), torch.from_numpy(np.asarray(tgt, np.float32)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return StudentRun(net, losses)


def student_predict(net: torch.nn.Module, X: np.ndarray) -> np.ndarray:
    """Hard predictions at σ = 0."""
    with torch.no_grad():
        z = net(torch.from_numpy(np.column_stack([X, np.zeros(len(X), np.float32)]).astype(np.float32))).squeeze(1)
    return (z > 0).numpy().astype(np.float32)
