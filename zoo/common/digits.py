"""The digits stack: scikit-learn's bundled 8x8 digits (offline), fixed splits and labels, a small
deterministic classifier, a Frechet distance in a fixed PCA feature space, and the shared
class-conditional tiny DiT (diffusers ``DiTTransformer2DModel``, pixel space) with its sampler.

* Data: ``sklearn.datasets.load_digits`` (1,797 images, 10 classes, pixel values 0..16) scaled to
  ``[-1, 1]``; the split is ``train_test_split(test_size=0.2, stratify=y, random_state=0)`` (1,437 / 360).
* Classifier: multinomial logistic regression (lbfgs, C = 1, on pixels / 16), fitted on the train split;
  deterministic. :func:`classifier_accuracy` measures it on the test split.
* Frechet distance (Heusel et al., arXiv 1706.08500, eq. 6 - the FID formula) between Gaussian fits of
  features in a fixed 20-component PCA of the train split (``svd_solver="full"``).
* DiT (Peebles & Xie, arXiv 2212.09748): 2 layers, 2 heads x 32, patch 2 on 1x8x8 -> 16 tokens,
  adaLN-Zero with 10 classes (+ the null class 10 for classifier-free guidance), epsilon prediction,
  DDPM linear betas (1e-4 .. 0.02, T = 1000). Trained by ``tools/train_digits_dit.py``; weights in
  ``specs/weights/digits-dit.safetensors`` (sha256 :data:`DIGITS_DIT_SHA256`).
* UNet: an unconditional diffusers ``UNet2DModel`` (177k parameters; :data:`DIGITS_UNET`), epsilon prediction
  with the same DDPM schedule, trained by ``tools/train_f_dpmsolver_digits.py``; weights in
  ``specs/weights/f-dpmsolver-digits-unet.safetensors``. F-DPMSolver samples it; PROBE holds it out as a
  differently trained generator.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field

from registry.contract import FactoryParams, factory

__all__ = [
    "digits_images", "DigitsSplit", "digits_split", "to_pixels", "DigitsClassifier", "digits_classifier", "classifier_accuracy",
    "PCAFeatures", "pca_features", "frechet_distance", "DIGITS_DIT", "NULL_CLASS", "build_digits_dit", "load_digits_dit",
    "DIGITS_DIT_WEIGHTS", "DIGITS_DIT_SHA256", "sample_digits", "save_digit_grid",
]

NUM_CLASSES = 10
NULL_CLASS = 10  # DiT's label table has num_embeds_ada_norm + 1 rows; the last is the CFG null class
DIGITS_DIT: dict[str, Any] = dict(
    num_attention_heads=2, attention_head_dim=32, in_channels=1, out_channels=1, num_layers=2,
    sample_size=8, patch_size=2, num_embeds_ada_norm=NUM_CLASSES,
)
DIGITS_DIT_WEIGHTS = Path(__file__).resolve().parents[2] / "specs" / "weights" / "digits-dit.safetensors"
DIGITS_DIT_SHA256 = "b0aa605ea3f781565b9155a09a8d1c7e30a42dd0d420cb52a9a85eec2ece6cb4"


# ----------------------------------------------------------------------------- data
def digits_images() -> torch.Tensor:
    """All 1,797 digits scaled to ``[-1, 1]``, shape ``(1797, 1, 8, 8)``, float32 (sklearn's order)."""
    from sklearn.datasets import load_digits

    x = torch.tensor(load_digits().images, dtype=torch.float32) / 16.0
    return (x * 2 - 1)[:, None]


@dataclass(frozen=True)
class DigitsSplit:
    """Fixed stratified split: images in ``[-1, 1]`` ``(N, 1, 8, 8)`` and int64 labels ``(N,)``."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


@functools.lru_cache(maxsize=1)
def digits_split() -> DigitsSplit:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x = digits_images()
    y = torch.tensor(load_digits().target, dtype=torch.int64)
    idx_tr, idx_te = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y.numpy(), random_state=0)
    idx_tr, idx_te = torch.as_tensor(idx_tr), torch.as_tensor(idx_te)
    return DigitsSplit(x[idx_tr], y[idx_tr], x[idx_te], y[idx_te])


def to_pixels(images: torch.Tensor) -> np.ndarray:
    """``[-1, 1]`` images (any leading shape ending in 8x8) -> ``(N, 64)`` float64 in ``[0, 1]`` (clipped)."""
    x = images.detach().to(torch.float64).reshape(images.shape[0], -1).clamp(-1, 1)
    return ((x + 1) / 2).cpu().numpy()


# ----------------------------------------------------------------------------- classifier
class DigitsClassifier:
    """Logistic regression on ``[0, 1]`` pixels, fitted on the train split (deterministic lbfgs)."""

    def __init__(self) -> None:
        from sklearn.linear_model import LogisticRegression

        s = digits_split()
        self.clf = LogisticRegression(C=1.0, max_iter=5000, tol=1e-6)
        self.clf.fit(to_pixels(s.x_train), s.y_train.numpy())

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(self.clf.predict(to_pixels(images)), dtype=torch.int64)

    def predict_proba(self, images: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(self.clf.predict_proba(to_pixels(images)))

    def accuracy(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        return float((self.predict(images) == labels.reshape(-1).cpu()).double().mean())


@functools.lru_cache(maxsize=1)
def digits_classifier() -> DigitsClassifier:
    return DigitsClassifier()


def classifier_accuracy() -> float:
    """Test-split accuracy of :func:`digits_classifier`."""
    s = digits_split()
    return digits_classifier().accuracy(s.x_test, s.y_test)


# ----------------------------------------------------------------------------- Frechet distance
class PCAFeatures:
    """A fixed ``n_components`` PCA of the train split's ``[0, 1]`` pixels (the Frechet feature space)."""

    def __init__(self, n_components: int = 20) -> None:
        from sklearn.decomposition import PCA

        self.pca = PCA(n_components=n_components, svd_solver="full").fit(to_pixels(digits_split().x_train))

    def __call__(self, images: torch.Tensor) -> np.ndarray:
        return self.pca.transform(to_pixels(images))


@functools.lru_cache(maxsize=4)
def pca_features(n_components: int = 20) -> PCAFeatures:
    return PCAFeatures(n_components)


def _frechet_gaussians(m1: np.ndarray, c1: np.ndarray, m2: np.ndarray, c2: np.ndarray) -> float:
    """``||m1 - m2||^2 + Tr(C1 + C2 - 2 (C1 C2)^{1/2})``, with the trace of the square root computed
    from the eigenvalues of ``C1^{1/2} C2 C1^{1/2}`` (symmetric PSD, so no complex round-off)."""
    w, v = np.linalg.eigh(c1)
    s1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    mid = s1 @ c2 @ s1
    tr_sqrt = np.sqrt(np.clip(np.linalg.eigvalsh(0.5 * (mid + mid.T)), 0, None)).sum()
    return float(((m1 - m2) ** 2).sum() + np.trace(c1) + np.trace(c2) - 2 * tr_sqrt)


def frechet_distance(a: torch.Tensor, b: torch.Tensor | None = None, n_components: int = 20) -> float:
    """Frechet distance between image sets ``a`` and ``b`` (default: the test split) in the fixed PCA space."""
    f = pca_features(n_components)
    fa = f(a)
    fb = f(digits_split().x_test if b is None else b)
    return _frechet_gaussians(fa.mean(0), np.cov(fa, rowvar=False), fb.mean(0), np.cov(fb, rowvar=False))


# ----------------------------------------------------------------------------- the tiny class-conditional DiT
class DigitsDiTConfig(FactoryParams):
    """``config`` of :func:`build_digits_dit` in a spec: overrides of :data:`DIGITS_DIT`, bounded."""

    num_attention_heads: int = Field(2, ge=1, le=16)
    attention_head_dim: int = Field(32, ge=1, le=128)
    in_channels: int = Field(1, ge=1, le=8)
    out_channels: int = Field(1, ge=1, le=16)
    num_layers: int = Field(2, ge=1, le=12)
    sample_size: int = Field(8, ge=2, le=64)
    patch_size: int = Field(2, ge=1, le=8)
    num_embeds_ada_norm: int = Field(NUM_CLASSES, ge=1, le=1000)


@factory(params=DigitsDiTConfig)
def build_digits_dit(**overrides: Any):
    """The digits DiT architecture (random init). A spec names it as a ``source: zoo`` factory with
    ``weights: weights/digits-dit.safetensors`` and the sha256 (the engine loads strictly);
    :func:`load_digits_dit` does the same in Python."""
    from diffusers import DiTTransformer2DModel

    return DiTTransformer2DModel(**{**DIGITS_DIT, **overrides}).eval()


def load_digits_dit(path: str | Path | None = None, sha256: str | None = None):
    """The shipped digits DiT (strict load; sha256 checked when given, default: the shipped digest)."""
    from safetensors.torch import load_file

    from .training import sha256_file

    path = Path(path or DIGITS_DIT_WEIGHTS)
    want = sha256 if sha256 is not None else (DIGITS_DIT_SHA256 if path == DIGITS_DIT_WEIGHTS else None)
    if want:
        got = sha256_file(path)
        if got != want:
            raise ValueError(f"{path}: sha256 {got} does not match the expected {want}")
    model = build_digits_dit()
    model.load_state_dict(load_file(str(path)), strict=True)
    return model.eval()


# ----------------------------------------------------------------------------- the tiny unconditional UNet
DIGITS_UNET: dict[str, Any] = dict(
    sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=[16, 32],
    down_block_types=["DownBlock2D", "AttnDownBlock2D"], up_block_types=["AttnUpBlock2D", "UpBlock2D"], norm_num_groups=8,
)

#: mean pixel value of the training data (``digits_images().mean()``; checked in tests): the ``data_mean`` that
#: F-DPMSolver's ``first_eps="mean"`` uses for the digits UNet
DIGITS_MEAN = -0.3894794285297394

UNetBlock = Literal["DownBlock2D", "AttnDownBlock2D", "UpBlock2D", "AttnUpBlock2D"]


class DigitsUNetConfig(FactoryParams):
    """``config`` of :func:`build_digits_unet`: overrides of :data:`DIGITS_UNET`, bounded."""

    sample_size: int = Field(8, ge=4, le=256)
    in_channels: int = Field(1, ge=1, le=16)
    out_channels: int = Field(1, ge=1, le=16)
    layers_per_block: int = Field(1, ge=1, le=8)
    block_out_channels: list[int] = Field([16, 32], min_length=1, max_length=6)
    down_block_types: list[UNetBlock] = Field(["DownBlock2D", "AttnDownBlock2D"], min_length=1, max_length=6)
    up_block_types: list[UNetBlock] = Field(["AttnUpBlock2D", "UpBlock2D"], min_length=1, max_length=6)
    norm_num_groups: int = Field(8, ge=1, le=64)


@factory(params=DigitsUNetConfig)
def build_digits_unet(**overrides: Any):
    """The digits UNet architecture (random init; the spec loads the shipped weights with strict=True). The model
    carries ``data_mean`` (its training data's mean pixel value) for ``first_eps="mean"``."""
    from diffusers import UNet2DModel

    model = UNet2DModel(**{**DIGITS_UNET, **overrides}).eval()
    model.data_mean = DIGITS_MEAN
    return model


def make_scheduler(name: str = "ddim", **overrides: Any):
    """A diffusers scheduler with the DiT's training schedule (DDPM linear betas, T = 1000, epsilon)."""
    import diffusers

    classes = {"ddim": "DDIMScheduler", "ddpm": "DDPMScheduler", "dpmsolver++": "DPMSolverMultistepScheduler", "unipc": "UniPCMultistepScheduler",
               "euler": "EulerDiscreteScheduler"}
    if name not in classes:
        raise ValueError(f"unknown scheduler {name!r}; have {sorted(classes)}")
    cfg: dict[str, Any] = dict(num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02, beta_schedule="linear", prediction_type="epsilon")
    if name in ("ddim", "ddpm"):
        cfg["clip_sample"] = False
    if name == "ddim":
        cfg["timestep_spacing"] = "trailing"
    cfg.update(overrides)
    return getattr(diffusers, classes[name])(**cfg)


def sample_digits(model: Any, labels: torch.Tensor, num_inference_steps: int = 50, scheduler: str | Any = "ddim", seed: int = 0,
                  guidance_scale: float = 1.0, noise: torch.Tensor | None = None, progress: bool = False, with_grad: bool = False) -> torch.Tensor:
    """Class-conditional samples ``(B, 1, 8, 8)`` in ``[-1, 1]``-scale (not clipped) for int ``labels`` ``(B,)``.

    Runs :func:`zoo.common.scheduler_loop.run_scheduler_loop` with ``class_labels``; guidance uses the
    null class :data:`NULL_CLASS`.
    """
    from .scheduler_loop import run_scheduler_loop

    labels = torch.as_tensor(labels, dtype=torch.int64).reshape(-1)
    sch = make_scheduler(scheduler) if isinstance(scheduler, str) else scheduler
    if noise is None:
        g = torch.Generator().manual_seed(int(seed))
        noise = torch.randn((labels.shape[0], 1, 8, 8), generator=g)
    dtype = next(model.parameters()).dtype
    uncond = {"class_labels": torch.full_like(labels, NULL_CLASS)}
    return run_scheduler_loop(sch, model, noise.to(dtype), num_inference_steps, model_kwargs={"class_labels": labels}, guidance_scale=guidance_scale,
                              uncond_kwargs=uncond, generator=torch.Generator().manual_seed(int(seed) + 1), progress=progress, with_grad=with_grad)


def save_digit_grid(images: torch.Tensor, labels: torch.Tensor, path: str | Path, per_class: int = 10, title: str | None = None) -> Path:
    """A PNG grid: one row per class (0..9), ``per_class`` samples each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = labels.reshape(-1).cpu()
    fig, axes = plt.subplots(NUM_CLASSES, per_class, figsize=(per_class * 0.6, NUM_CLASSES * 0.6), squeeze=False)
    for c in range(NUM_CLASSES):
        idx = (labels == c).nonzero().reshape(-1)[:per_class]
        for j in range(per_class):
            ax = axes[c, j]
            ax.axis("off")
            if j < len(idx):
                ax.imshow(images[idx[j]].reshape(8, 8).clamp(-1, 1).cpu().numpy(), cmap="gray_r", vmin=-1, vmax=1)
    if title:
        fig.suptitle(title, fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
