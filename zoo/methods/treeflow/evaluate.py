"""Evaluation of generated tables as in ForestDiffusion's benchmark (Jolicoeur-Martineau et al.,
arXiv 2309.09968, sec. 4): exact 1-Wasserstein to held-out rows, a real-vs-fake discriminator AUC,
downstream utility (train on fake, test on real) and wall time.

Datasets: scikit-learn's iris, wine and breast_cancer (all columns real, label-conditional), split
stratified 70 / 30 with a seed. Every measure works in the min-max scale of the *training* split
(features to ``[0, 1]``) with the label one-hot appended, so W1 is comparable across columns.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.common.tabular import wasserstein1

from .flow import FlowConfig, TreeFlow

DATASETS = ("iris", "wine", "breast_cancer")


@dataclass
class Split:
    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def load_split(name: str, seed: int = 0, test_size: float = 0.3) -> Split:
    """A stratified train/test split of a scikit-learn dataset (shipped with the wheel; no download)."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    loaders = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}
    if name not in loaders:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}")
    X, y = loaders[name](return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, random_state=seed, stratify=y)
    return Split(name, Xtr, ytr, Xte, yte)


def _scaled(split: Split, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    lo, hi = split.X_train.min(0), split.X_train.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    classes = np.unique(split.y_train)
    return np.column_stack([(X - lo) / span, (np.asarray(y)[:, None] == classes[None, :]).astype(float)])


def discriminator_auc(real: np.ndarray, fake: np.ndarray, seed: int = 0) -> float:
    """5-fold cross-validated ROC AUC of a random forest telling real rows from fake ones (0.5: indistinguishable)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    X = np.vstack([real, fake])
    lab = np.r_[np.ones(len(real)), np.zeros(len(fake))]
    clf = RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1)
    p = cross_val_predict(clf, X, lab, cv=StratifiedKFold(5, shuffle=True, random_state=seed), method="predict_proba")[:, 1]
    return float(roc_auc_score(lab, p))


def utility(X_fit: np.ndarray, y_fit: np.ndarray, X_test: np.ndarray, y_test: np.ndarray) -> float:
    """Accuracy on real test rows of a logistic regression trained on ``(X_fit, y_fit)`` (standardised)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(np.unique(y_fit)) < 2:
        return float(np.mean(y_test == y_fit[0]))
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return float(clf.fit(X_fit, y_fit).score(X_test, y_test))


def evaluate(split: Split, cfg: FlowConfig, seed: int = 0, use_cache: bool = False, progress: bool = False) -> dict[str, Any]:
    """Fit on the training split, sample as many rows as the test split (for W1-test) and as the training
    split (W1-train, utility), and measure. Without ``label_conditional`` the label is a categorical column
    of one flow (one-hot encoded, arg-maxed back). ``use_cache=False`` (default) times a real fit: wall time and
    this process's CPU time (``fit_cpu_s``, what other jobs on the machine do not inflate)."""
    t0, c0 = time.perf_counter(), time.process_time()
    if cfg.label_conditional:
        model = TreeFlow(cfg, use_cache=use_cache).fit(split.X_train, split.y_train, progress=progress)
    else:  # the label is one more (categorical) column of a single flow
        d = split.X_train.shape[1]
        model = TreeFlow(cfg, categorical=[d], use_cache=use_cache).fit(np.column_stack([split.X_train, split.y_train]), progress=progress)
    fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0

    def sample(n: int, s: int) -> tuple[np.ndarray, np.ndarray]:
        X, y = model.sample(n, seed=s)
        return (X, y) if cfg.label_conditional else (X[:, :-1], X[:, -1].astype(split.y_train.dtype))

    t0 = time.perf_counter()
    Xf, yf = sample(len(split.X_train), seed + 1)
    sample_s = time.perf_counter() - t0
    Xf_te, yf_te = sample(len(split.X_test), seed + 2)
    real_te, real_tr = _scaled(split, split.X_test, split.y_test), _scaled(split, split.X_train, split.y_train)
    return {
        "dataset": split.name, "mode": cfg.mode, "n_t": cfg.n_t, "K": cfg.duplicate_K,
        "w1_test": wasserstein1(_scaled(split, Xf_te, yf_te), real_te),
        "w1_train": wasserstein1(_scaled(split, Xf, yf), real_tr),
        "auc": discriminator_auc(real_te, _scaled(split, Xf_te, yf_te), seed),
        "utility": utility(Xf, yf, split.X_test, split.y_test),
        "utility_real": utility(split.X_train, split.y_train, split.X_test, split.y_test),
        "fit_s": fit_s, "fit_cpu_s": fit_cpu_s, "sample_s": sample_s, "samples": Xf, "labels": yf,
    }
