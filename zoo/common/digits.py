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
  DDPM linear betas (1e-4 .. 0.02, T = 1000). Trained by :func:`train_digits_dit`.
* UNet: an unconditional diffusers ``UNet2DModel`` (177k parameters; :data:`DIGITS_UNET`), epsilon prediction
  with the same DDPM schedule, trained by :func:`train_digits_unet`. F-DPMSolver samples it; PROBE holds it out
  as a differently trained generator.

Both checkpoints are declared once, with their sha256, by ``specs/digits.yaml`` (roles ``dit`` and ``unet``,
``zoo train digits [--check]``); the specs that use them name those roles (``source: role, from_spec: digits``),
so their code gets the models from the engine (``ctx.models("toy")["dit"]``), never from a path.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch
from pydantic import Field

from registry.contract import FactoryParams, Options, Procedure, ProcedureParams, factory, trainer
from registry.limits import Bound
from registry.results import ImageOutput
from zoo.common.params import NUM_CLASSES, DDPMTrainOptions, DigitsDiTConfig, DigitsSamplerParams, DigitsUNetConfig, UNetBlock  # noqa: F401 - the torch-free models (registry.declare)

__all__ = [
    "digits_images", "DigitsSplit", "digits_split", "to_pixels", "DigitsClassifier", "digits_classifier", "classifier_accuracy",
    "PCAFeatures", "pca_features", "frechet_distance", "DIGITS_DIT", "NULL_CLASS", "build_digits_dit", "sample_digits",
    "save_digit_grid", "DigitsSampler", "train_digits_dit", "train_digits_unet",
]

NULL_CLASS = 10  # DiT's label table has num_embeds_ada_norm + 1 rows; the last is the CFG null class
DIGITS_DIT: dict[str, Any] = dict(
    num_attention_heads=2, attention_head_dim=32, in_channels=1, out_channels=1, num_layers=2,
    sample_size=8, patch_size=2, num_embeds_ada_norm=NUM_CLASSES,
)


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


@factory(params=DigitsDiTConfig)
def build_digits_dit(**overrides: Any):
    """The digits DiT architecture (random init). ``specs/digits.yaml`` names it as a ``source: zoo`` factory with
    the shipped weights and their sha256 (the engine loads them strictly); other specs name that role."""
    from diffusers import DiTTransformer2DModel

    return DiTTransformer2DModel(**{**DIGITS_DIT, **overrides}).eval()


# ----------------------------------------------------------------------------- the tiny unconditional UNet
DIGITS_UNET: dict[str, Any] = dict(
    sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=[16, 32],
    down_block_types=["DownBlock2D", "AttnDownBlock2D"], up_block_types=["AttnUpBlock2D", "UpBlock2D"], norm_num_groups=8,
)

#: mean pixel value of the training data (``digits_images().mean()``; checked in tests): the ``data_mean`` that
#: F-DPMSolver's ``first_eps="mean"`` uses for the digits UNet
DIGITS_MEAN = -0.3894794285297394


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


# ----------------------------------------------------------------------------- the spec's sampler and trainers
@dataclass
class DigitsSampleOutput(ImageOutput):
    """``samples`` (N, 1, 8, 8) in [-1, 1] scale (not clipped); ``labels`` (N,): the conditioning classes (DiT) or None (UNet)."""

    labels: Any = None


class DigitsSampler(Procedure):
    """DDIM samples of the shared digits DiT (class-conditional, :func:`sample_digits`) or UNet (unconditional,
    the same scheduler loop without labels), from the role ``role`` of ``specs/digits.yaml``."""

    kind = "sampler"

    Params = DigitsSamplerParams

    def __call__(self, *, seed: int = 0, labels: Annotated[Any, Bound("rows")] = None,
                 noise: Annotated[torch.Tensor, Bound("rows")] | None = None, progress: bool = False) -> DigitsSampleOutput:
        from .scheduler_loop import run_scheduler_loop

        p = self.params
        model = self.models[p.role]
        if labels is None:
            labels = torch.arange(NUM_CLASSES).repeat_interleave(p.per_class)
        labels = torch.as_tensor(labels, dtype=torch.int64).reshape(-1)
        with torch.no_grad():
            if p.role == "dit":
                x = sample_digits(model, labels, p.num_inference_steps, "ddim", seed, p.guidance_scale, noise=noise, progress=progress)
                return DigitsSampleOutput(samples=x, labels=labels)
            if noise is None:
                noise = torch.randn((labels.shape[0], 1, 8, 8), generator=torch.Generator().manual_seed(int(seed)))
            x = run_scheduler_loop(make_scheduler("ddim"), model, noise.to(next(model.parameters()).dtype), p.num_inference_steps,
                                   generator=torch.Generator().manual_seed(int(seed) + 1), progress=progress)
        return DigitsSampleOutput(samples=x, labels=None)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        g = torch.Generator().manual_seed(5)
        return {"labels": torch.arange(batch_size) % NUM_CLASSES, "noise": torch.randn((batch_size, 1, 8, 8), generator=g)}


def _train_ddpm(model: Any, data: torch.Tensor, labels: torch.Tensor | None, opts: DDPMTrainOptions, g: torch.Generator,
                desc: str, mininterval: float = 2.0) -> dict[str, torch.Tensor]:
    """DDPM epsilon objective (Ho et al. 2020, arXiv 2006.11239, eq. 14) with the diffusers default linear betas
    (1e-4 .. 0.02, T = 1000); AdamW + one-cycle (5 % warm-up), gradient clipping at 1, EMA 0.999. Returns the EMA state."""
    from diffusers import DDPMScheduler

    from .training import EMA, adamw_one_cycle, ddpm_eps_loss, optimizer_step, progress

    ab = DDPMScheduler().alphas_cumprod
    opt, sched = adamw_one_cycle(model.parameters(), opts.lr, opts.steps, pct_start=0.05, weight_decay=0.0)
    ema = EMA(model, 0.999)
    for step in (bar := progress(range(opts.steps), desc=desc, mininterval=mininterval)):
        loss = ddpm_eps_loss(model, data, ab, opts.batch, g, labels=labels)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        ema.update(model, step)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    return ema.state_dict()


@trainer(options=DDPMTrainOptions)
def train_digits_dit(ctx: Any, opts: DDPMTrainOptions) -> None:
    """The shared class-conditional DiT on the digits train split: class labels through DiT's adaLN-Zero label
    embedding, which drops labels to the null class with probability 0.1 in training mode (classifier-free guidance
    training, Ho & Salimans, arXiv 2207.12598); seed ``ctx.seed``; writes ``digits-dit.safetensors``."""
    from .training import save_checkpoint, setup_deterministic

    g = setup_deterministic(ctx.seed)
    s = digits_split()
    model = build_digits_dit().train()
    save_checkpoint(_train_ddpm(model, s.x_train, s.y_train, opts, g, "digits-dit"), ctx.path("digits-dit.safetensors"))


@trainer(options=DDPMTrainOptions)
def train_digits_unet(ctx: Any, opts: DDPMTrainOptions) -> None:
    """The unconditional digits UNet on all 1,797 digits (the spec's params: 3,000 steps, batch 64, lr 2e-3);
    seed ``ctx.seed``; writes ``f-dpmsolver-digits-unet.safetensors``."""
    from .training import save_checkpoint, setup_deterministic

    g = setup_deterministic(ctx.seed)
    model = build_digits_unet().train()
    print(f"params: {sum(p.numel() for p in model.parameters()):,}")
    state = _train_ddpm(model, digits_images(), None, opts, g, "digits-unet", mininterval=0.1)
    save_checkpoint(state, ctx.path("f-dpmsolver-digits-unet.safetensors"))
