"""Sparse autoencoders (ReLU, TopK, BatchTopK) with the standard initialisation, b_dec init
options, AuxK, the decoder-norm constraint, a seeded trainer and safetensors save / load.

Shared by ``zoo.methods.sae_feature_death`` and ``zoo.methods.sae_tm``.

Notation (Simon, Adams & Zou, ICML 2026, arXiv 2605.31518, §2; Gao et al. 2024 "Scaling and
evaluating sparse autoencoders" for TopK / AuxK; Bussmann et al. 2024 for BatchTopK):

* pre-activation   h(x) = W_enc (x - b_dec) + b_enc,         W_enc in R^{F x d}
* ReLU SAE         z = ReLU(h)
* TopK SAE         z = TopK_k(ReLU(h))            (per token)
* BatchTopK SAE    keep the k*B largest entries of ReLU(h) over the whole batch; at inference a
                   global threshold theta (EMA of the smallest kept activation) replaces TopK
* decoder          x_hat = W_dec z + b_dec,                  W_dec in R^{d x F}, unit-norm columns
* loss             ||x - x_hat||^2 (+ alpha * AuxK  |  + l1 * sum_f z_f ||W_dec[:, f]|| for ReLU)

Standard init (the paper's "b_dec = 0" baseline, github.com/ElanaPearl/sae-feature-death
``demo.ipynb``): W_dec columns random, normalised to unit norm, ``W_enc = W_dec^T``,
``b_enc = 0``, ``b_dec = 0``. The random columns are, by default (``dec_init="uniform"``), the
authors' ``nn.Linear`` init (kaiming-uniform U(-1/sqrt(F), 1/sqrt(F)) entries, drawn after the
encoder's ``nn.Linear(d, F)`` as in the demo, so ``seed=s`` gives exactly the demo's SAE after
``torch.manual_seed(s)``; dictionary_learning and sparsify also start from ``nn.Linear``
weights); ``dec_init="gaussian"`` draws isotropic directions, the assumption behind the closed
forms Phi(-C/gamma) and Phi(t_k - C/gamma).

**Centred parameterisation.** ``b_dec`` is stored as ``center`` (a buffer, fixed at init: 0,
the data mean or the geometric median) plus ``b_dec_delta`` (the trained parameter), and every
computation sees the data only through ``x - center``. This is mathematically the same SAE as
a plain ``b_dec`` parameter initialised to ``center`` (same gradients, same Adam updates), and it
makes the paper's translation-invariance of centred SAEs hold bit for bit whenever ``x - center``
is itself computed exactly.

Trainer defaults follow the dictionary_learning TopK / BatchTopK trainers used by SAE-TM
(github.com/saprmarks/dictionary_learning): Adam(0.9, 0.999), lr = 2e-4 / sqrt(F / 2^14) unless
given, grad-clip 1.0, decoder columns renormalised after every step with the gradient component
parallel to each column removed before the step, AuxK coefficient 1/32 with k_aux = d/2 on
latents dead for ``dead_tokens`` tokens (residual detached, normalised by its variance),
BatchTopK threshold EMA beta = 0.999 from step 1000.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from registry.contract import FactoryParams, factory
from zoo.common.params import Arch, DecInit, SAEConfig, SeededSAEConfig  # noqa: F401 - the torch-free models (registry.declare)

BDecInit = Literal["zeros", "mean", "geometric_median"]

__all__ = [
    "SparseAutoencoder",
    "TrainConfig",
    "build_sae",
    "geometric_median",
    "init_center",
    "load_sae",
    "save_sae",
    "train_sae",
]


# ----------------------------------------------------------------------------- geometric median

def geometric_median(x: torch.Tensor, max_iter: int = 200, tol: float = 1e-6, eps: float = 1e-8) -> torch.Tensor:
    """Weiszfeld's algorithm (as in the paper's §4.6 fix and dictionary_learning's b_dec init):
    start at the mean, iterate ``y <- sum_i w_i x_i / sum_i w_i`` with
    ``w_i = 1 / max(||x_i - y||, eps)``; stop after ``max_iter`` iterations or when the step is
    below ``tol * (1 + ||y||)``. Computed in float64, returned in ``x``'s dtype."""
    xs = x.detach().to(torch.float64)
    y = xs.mean(0)
    for _ in range(max_iter):
        w = 1.0 / torch.clamp(torch.linalg.vector_norm(xs - y, dim=1), min=eps)
        y_new = (w[:, None] * xs).sum(0) / w.sum()
        step = torch.linalg.vector_norm(y_new - y)
        y = y_new
        if step <= tol * (1.0 + torch.linalg.vector_norm(y)):
            break
    return y.to(x.dtype)


def init_center(x: torch.Tensor, how: BDecInit) -> torch.Tensor:
    """The b_dec init the paper compares: ``zeros`` (standard), ``mean`` or ``geometric_median``."""
    if how == "zeros":
        return torch.zeros(x.shape[1], dtype=x.dtype)
    if how == "mean":
        return x.to(torch.float64).mean(0).to(x.dtype)
    if how == "geometric_median":
        return geometric_median(x)
    raise ValueError(f"b_dec_init must be zeros, mean or geometric_median, not {how!r}")


# ----------------------------------------------------------------------------- the module


class SparseAutoencoder(nn.Module):
    """ReLU / TopK / BatchTopK SAE, ``F = n_features`` latents on ``d = d_in`` inputs.

    Parameters: ``W_enc (F, d)``, ``b_enc (F)``, ``W_dec (d, F)``, ``b_dec_delta (d)``;
    buffers: ``center (d)`` (b_dec = center + b_dec_delta), ``threshold ()`` (BatchTopK inference
    threshold, -1 until set) and ``tokens_since_fired (F)`` (AuxK dead-latent counter).
    """

    def __init__(self, d_in: int, n_features: int, arch: Arch = "topk", k: int = 32, seed: int = 0,
                 dec_init: DecInit = "uniform"):
        super().__init__()
        if dec_init not in ("uniform", "gaussian"):
            raise ValueError(f"dec_init must be uniform (the authors' nn.Linear init) or gaussian, not {dec_init!r}")
        self.dec_init = dec_init
        if arch not in ("relu", "topk", "batchtopk"):
            raise ValueError(f"arch must be relu, topk or batchtopk, not {arch!r}")
        if not 1 <= k <= n_features:
            raise ValueError(f"k must be in [1, n_features={n_features}], got {k}")
        self.d_in, self.n_features, self.arch, self.k = int(d_in), int(n_features), arch, int(k)
        self.W_enc = nn.Parameter(torch.empty(n_features, d_in))
        self.b_enc = nn.Parameter(torch.zeros(n_features))
        self.W_dec = nn.Parameter(torch.empty(d_in, n_features))
        self.b_dec_delta = nn.Parameter(torch.zeros(d_in))
        self.register_buffer("center", torch.zeros(d_in))
        self.register_buffer("threshold", torch.tensor(-1.0))
        self.register_buffer("tokens_since_fired", torch.zeros(n_features, dtype=torch.long))
        self.reset_parameters(seed)

    # -- init
    @torch.no_grad()
    def reset_parameters(self, seed: int = 0) -> None:
        """Standard init: unit-norm random decoder columns, W_enc = W_dec^T, b_enc = 0, b_dec = 0.

        ``dec_init="uniform"`` (default, the authors' demo): the generator seeded with ``seed``
        first draws an ``nn.Linear(d, F)`` encoder (weight and bias, discarded: W_enc is tied to
        W_dec^T and b_enc = 0), then the ``nn.Linear(F, d, bias=False)`` decoder weight
        (d x F) with ``nn.init.kaiming_uniform_(a=sqrt(5))``, i.e. U(-1/sqrt(F), 1/sqrt(F)),
        exactly the draws of ``TopKSAE(d, F, k)`` after ``torch.manual_seed(seed)`` in
        github.com/ElanaPearl/sae-feature-death ``demo.ipynb``. Its columns are not isotropic:
        projections onto a coordinate-aligned outlier are lighter-tailed than Gaussian, so
        fewer features are dead-by-TopK than the closed form predicts.
        ``dec_init="gaussian"`` draws isotropic directions (each coordinate of a column is then
        ~N(0, 1/d)), the assumption behind the closed forms Phi(-C/gamma), Phi(t_k - C/gamma)."""
        g = torch.Generator().manual_seed(int(seed))
        d, F = self.d_in, self.n_features
        if self.dec_init == "uniform":
            enc_w = torch.empty(F, d)
            nn.init.kaiming_uniform_(enc_w, a=math.sqrt(5), generator=g)
            nn.init.uniform_(torch.empty(F), -1 / math.sqrt(d), 1 / math.sqrt(d), generator=g)
            w = torch.empty(d, F)
            nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=g)
        else:
            w = torch.randn(d, F, generator=g, dtype=torch.float32)
        w = w / torch.linalg.vector_norm(w, dim=0, keepdim=True)
        self.W_dec.copy_(w)
        self.W_enc.copy_(w.T)
        self.b_enc.zero_()
        self.b_dec_delta.zero_()
        self.center.zero_()
        self.threshold.fill_(-1.0)
        self.tokens_since_fired.zero_()

    @torch.no_grad()
    def set_b_dec_init(self, x: torch.Tensor, how: BDecInit) -> None:
        """Set b_dec to 0 / the mean / the geometric median of ``x`` (the paper's centring fix)."""
        self.center.copy_(init_center(x.detach().cpu().float(), how).to(self.center))
        self.b_dec_delta.zero_()

    @property
    def b_dec(self) -> torch.Tensor:
        return self.center + self.b_dec_delta

    # -- forward
    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """h(x) = W_enc (x - b_dec) + b_enc, computed as W_enc((x - center) - delta) + b_enc."""
        return ((x - self.center) - self.b_dec_delta) @ self.W_enc.T + self.b_enc

    def activate(self, h: torch.Tensor, use_threshold: bool | None = None) -> torch.Tensor:
        """Latents from pre-activations (see the module docstring for each architecture)."""
        r = torch.relu(h)
        if self.arch == "relu":
            return r
        if self.arch == "batchtopk":
            if use_threshold is None:
                use_threshold = not self.training and float(self.threshold) >= 0
            if use_threshold:
                return r * (r > self.threshold)
            flat = r.flatten()
            kk = min(self.k * r.shape[0], flat.numel())
            vals, idx = flat.topk(kk, sorted=False)
            return torch.zeros_like(flat).scatter(0, idx, vals).view_as(r)
        vals, idx = r.topk(self.k, dim=-1, sorted=False)
        return torch.zeros_like(r).scatter(-1, idx, vals)

    def encode(self, x: torch.Tensor, use_threshold: bool | None = None) -> torch.Tensor:
        return self.activate(self.pre_acts(x), use_threshold)

    def decode_centered(self, z: torch.Tensor) -> torch.Tensor:
        """x_hat - center = W_dec z + delta."""
        return z @ self.W_dec.T + self.b_dec_delta

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decode_centered(z) + self.center

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encode(x)
        return self.decode(z), z

    # -- constraint
    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Project decoder columns back to the unit sphere (after every optimiser step)."""
        self.W_dec.div_(torch.linalg.vector_norm(self.W_dec, dim=0, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        """Remove the gradient component parallel to each decoder column (before the step)."""
        if self.W_dec.grad is None:
            return
        w, g = self.W_dec, self.W_dec.grad
        g.sub_((g * w).sum(0, keepdim=True) * w)

    def config(self) -> dict:
        return {"d_in": self.d_in, "n_features": self.n_features, "arch": self.arch, "k": self.k}


@factory(params=SeededSAEConfig)
def build_sae(d_in: int = 384, n_features: int = 256, arch: Arch = "topk", k: int = 8, seed: int = 0,
              dec_init: DecInit = "uniform") -> SparseAutoencoder:
    """Factory for specs (``source: zoo``): a standard-init SAE (weights are loaded by the engine)."""
    return SparseAutoencoder(d_in=d_in, n_features=n_features, arch=arch, k=k, seed=seed, dec_init=dec_init)


# ----------------------------------------------------------------------------- trainer

@dataclass
class TrainConfig:
    """Trainer hyper-parameters (defaults from dictionary_learning's TopK / BatchTopK trainers)."""

    steps: int = 1000
    batch_size: int = 256
    lr: float | None = None  # None -> 2e-4 / sqrt(F / 2**14)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0
    b_dec_init: BDecInit = "zeros"
    auxk_alpha: float = 0.0  # 1/32 in the reference trainers; 0 disables AuxK
    k_aux: int | None = None  # None -> d // 2
    dead_tokens: int = 10_000_000
    l1_coef: float = 0.0  # ReLU SAEs: weight of sum_f z_f ||W_dec[:, f]||
    threshold_beta: float = 0.999
    threshold_start_step: int = 1000
    seed: int = 0
    progress: bool = False
    log_every: int = 0  # 0: no history rows except the last
    desc: str = "SAE"


@dataclass
class TrainHistory:
    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    fvu: list[float] = field(default_factory=list)
    b_dec_rel_dist: list[float] = field(default_factory=list)  # ||b_dec - mu|| / ||mu||
    max_dec_norm_err: float = 0.0  # max over steps of | ||W_dec[:, f]|| - 1 |


def default_lr(n_features: int) -> float:
    """dictionary_learning's default: 2e-4 / sqrt(F / 2^14)."""
    return 2e-4 / math.sqrt(n_features / 2**14)


def _auxk_loss(sae: SparseAutoencoder, h: torch.Tensor, e: torch.Tensor, k_aux: int, dead: torch.Tensor) -> torch.Tensor:
    """AuxK (Gao et al. 2024): reconstruct the detached residual e from the top-k_aux dead latents,
    normalised by the residual's variance."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return h.new_zeros(())
    kk = min(k_aux, n_dead)
    r = torch.relu(h).masked_fill(~dead[None, :], 0.0)
    vals, idx = r.topk(kk, dim=-1, sorted=False)
    z_aux = torch.zeros_like(r).scatter(-1, idx, vals)
    e_hat = z_aux @ sae.W_dec.T
    num = (e - e_hat).pow(2).sum(-1).mean()
    den = (e - e.mean(0, keepdim=True)).pow(2).sum(-1).mean().clamp_min(1e-12)
    return num / den


def train_sae(
    sae: SparseAutoencoder,
    x: torch.Tensor,
    cfg: TrainConfig,
    callback: Callable[[int, SparseAutoencoder], None] | None = None,
) -> TrainHistory:
    """Train ``sae`` on the rows of ``x`` (N, d) with minibatch Adam; deterministic for a seed.

    ``cfg.b_dec_init`` sets b_dec (zeros / mean / geometric median of ``x``) before training.
    ``callback(step, sae)`` runs after every step (used by tests to check the decoder norm).
    """
    x = x.detach().float()
    n, d = x.shape
    if d != sae.d_in:
        raise ValueError(f"data has d={d}, SAE expects {sae.d_in}")
    sae.set_b_dec_init(x, cfg.b_dec_init)
    mu = x.to(torch.float64).mean(0)
    mu_norm = float(torch.linalg.vector_norm(mu)) or 1.0
    total_var = float((x.to(torch.float64) - mu).pow(2).sum(-1).mean()) or 1.0
    lr = cfg.lr if cfg.lr is not None else default_lr(sae.n_features)
    opt = torch.optim.Adam(sae.parameters(), lr=lr, betas=cfg.betas)
    g = torch.Generator().manual_seed(int(cfg.seed))
    k_aux = cfg.k_aux if cfg.k_aux is not None else max(1, d // 2)
    hist = TrainHistory()
    sae.train()
    it = range(cfg.steps)
    if cfg.progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=cfg.desc, leave=False)
    for step in it:
        idx = torch.randint(0, n, (cfg.batch_size,), generator=g)
        xb = x[idx]
        xc = xb - sae.center  # the only place the raw data enters
        h = (xc - sae.b_dec_delta) @ sae.W_enc.T + sae.b_enc
        z = sae.activate(h, use_threshold=False)
        xc_hat = sae.decode_centered(z)
        e = xc - xc_hat
        l2 = e.pow(2).sum(-1).mean()
        loss = l2
        if cfg.l1_coef > 0:
            loss = loss + cfg.l1_coef * (z * torch.linalg.vector_norm(sae.W_dec, dim=0)).sum(-1).mean()
        with torch.no_grad():
            fired = (z > 0).any(0)
            sae.tokens_since_fired.add_(cfg.batch_size)
            sae.tokens_since_fired[fired] = 0
        if cfg.auxk_alpha > 0:
            dead = sae.tokens_since_fired >= cfg.dead_tokens
            loss = loss + cfg.auxk_alpha * _auxk_loss(sae, h, e.detach(), k_aux, dead)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sae.remove_parallel_grad()
        if cfg.grad_clip and cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(sae.parameters(), cfg.grad_clip)
        opt.step()
        sae.normalize_decoder()
        if sae.arch == "batchtopk" and step >= cfg.threshold_start_step:
            with torch.no_grad():
                pos = z[z > 0]
                if pos.numel():
                    m = pos.min()
                    if float(sae.threshold) < 0:
                        sae.threshold.copy_(m)
                    else:
                        sae.threshold.mul_(cfg.threshold_beta).add_((1 - cfg.threshold_beta) * m)
        with torch.no_grad():
            err = float((torch.linalg.vector_norm(sae.W_dec, dim=0) - 1).abs().max())
            hist.max_dec_norm_err = max(hist.max_dec_norm_err, err)
        if callback is not None:
            callback(step, sae)
        last = step == cfg.steps - 1
        if last or (cfg.log_every and step % cfg.log_every == 0):
            with torch.no_grad():
                hist.step.append(step)
                hist.loss.append(float(loss.detach()))
                hist.fvu.append(float(l2) / total_var)
                hist.b_dec_rel_dist.append(float(torch.linalg.vector_norm(sae.b_dec.double() - mu)) / mu_norm)
            if cfg.progress:
                it.set_postfix(loss=f"{float(loss.detach()):.4g}")  # type: ignore[union-attr]
    sae.eval()
    return hist


@torch.no_grad()
def fraction_variance_unexplained(sae: SparseAutoencoder, x: torch.Tensor, chunk: int = 4096) -> float:
    """FVU = sum ||x - x_hat||^2 / sum ||x - mean(x)||^2 over the rows of ``x``."""
    x = x.float()
    mu = x.mean(0)
    num = den = 0.0
    for i in range(0, x.shape[0], chunk):
        xb = x[i : i + chunk]
        xc = xb - sae.center
        z = sae.activate(sae.pre_acts(xb))
        num += float((xc - sae.decode_centered(z)).pow(2).sum())
        den += float((xb - mu).pow(2).sum())
    return num / max(den, 1e-30)


# ----------------------------------------------------------------------------- save / load

def save_sae(sae: SparseAutoencoder, path: str | Path, dtype: torch.dtype | None = None) -> None:
    """Save the state dict as safetensors, with the architecture in the metadata (keys sorted: the same SAE gives
    the same bytes on every save)."""
    from safetensors.torch import save

    sd = {k: v.detach().contiguous().cpu() for k, v in sae.state_dict().items()}
    if dtype is not None:
        sd = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in sd.items()}
    meta = {k: str(v) for k, v in sae.config().items()}
    Path(path).write_bytes(_sorted_metadata(save(sd, metadata=meta)))


def _sorted_metadata(blob: bytes) -> bytes:
    """``blob`` (safetensors bytes) with its ``__metadata__`` keys in sorted order. safetensors writes the metadata
    from a hash map, so the same tensors and metadata give a header in a random key order (a different sha256 on most
    saves); the tensors, their header entries and the header's length and padding are unchanged."""
    import json

    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) != len(blob[8:8 + n].rstrip(b" ")):
        raise ValueError("safetensors header: unexpected serialisation (cannot reorder its metadata in place)")
    return blob[:8] + text.ljust(n, b" ") + blob[8 + n:]


def load_sae(path: str | Path) -> SparseAutoencoder:
    """Inverse of :func:`save_sae` (strict state-dict loading)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    sae = SparseAutoencoder(int(meta["d_in"]), int(meta["n_features"]), meta["arch"], int(meta["k"]))  # type: ignore[arg-type]
    sae.load_state_dict(load_file(str(path)), strict=True)
    sae.eval()
    return sae
