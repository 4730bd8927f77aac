"""The ``robuq`` transform, samplers and QAT recipe.

* :func:`quantize_dit` (a registered ``@transform``): a spec's derived role ``source: role`` applies it
  to a deep copy of the FP DiT: installs the quantised modules (ternary + FP low-rank branch,
  optional Hadamard, per-token activation bits, adaLN W4A4) and, for AMPN, measures per-group
  sensitivities on a fixed calibration batch of noised digits and allocates bits by the exact DP.
* :class:`QuantDigitsSampler`: DDIM class-conditional sampling from one (quantised or FP) role.
* :class:`QATDigits`: quantisation-aware fine-tuning of a private copy of a quantised role with the
  DDPM epsilon loss (straight-through gradients), reporting the held-out epsilon-MSE before and after.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from registry.contract import Procedure, private_copies, summarize, transform
from registry.limits import Batch
from registry.results import ImageOutput, ProcedureOutput

from .attention import attention_bits_of
from .model import ADALN, allocate_bits, group_costs, install_quantizers, layer_groups, load_packed, measure_sensitivities, quant_modules, set_group_bits
from .params import DiTLatentSamplerParams, QATDigitsParams, QuantDigitsSamplerCli, QuantDigitsSamplerParams, QuantizeDitParams
from .quant import hadamard_block

__all__ = ["quantize_dit", "ampn_allocate", "QuantDigitsSampler", "QATDigits", "DiTLatentSampler", "QuantSampleOutput", "QATOutput", "qat_finetune", "digits_eps_batch", "heldout_eps_mse"]


def digits_eps_batch(n: int = 64, seed: int = 0, split: str = "train") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed batch ``(x_t, t, labels, eps)`` of noised digits (DDPM linear betas, T = 1000), seeded."""
    from zoo.common.digits import digits_split, make_scheduler

    s = digits_split()
    x, y = (s.x_train, s.y_train) if split == "train" else (s.x_test, s.y_test)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(x.shape[0], generator=g)[:n]
    t = torch.randint(0, 1000, (idx.numel(),), generator=g)
    eps = torch.randn((idx.numel(), 1, 8, 8), generator=g)
    ab = make_scheduler("ddpm").alphas_cumprod[t].reshape(-1, 1, 1, 1)
    return ab.sqrt() * x[idx] + (1 - ab).sqrt() * eps, t, y[idx], eps


@torch.no_grad()
def heldout_eps_mse(model: Any, n: int = 360, seed: int = 1) -> float:
    """``E ||eps_theta(x_t, t, y) - eps||^2`` on a fixed noised batch of the test split."""
    xt, t, y, eps = digits_eps_batch(n, seed, "test")
    return float(((model(xt, t, class_labels=y).sample - eps) ** 2).mean())


@transform(params=QuantizeDitParams)
def quantize_dit(model: Any, a_bits: int | None = 4, hadamard: bool = True, block: int | None = None, lowrank_rank: int = 8,
                 weight: str = "ternary", adaln: bool = True, ampn_avg_bits: float | None = None, ampn_choices: list[int] | None = None,
                 calib_size: int = 64, calib_seed: int = 0, packed: Path | None = None,
                 attention_bits: int | None | Literal["auto"] = "auto", a_clip: str = "minmax") -> Any:
    """Quantise a diffusers DiT in place (see :func:`~.model.install_quantizers`); ``attention_bits`` (2..16;
    ``None`` = FP attention products; ``"auto"``, the default: a ``packed`` file's bits, else 8 = the paper's
    layout) fake-quantises the operands of ``QK^T`` and ``softmax V`` per token
    (:class:`~.attention.QuantAttnProcessor`); an explicit value that differs from a ``packed`` file's
    attention bits is an error (the file's layout rules; so is any other layout argument set away from its default
    that the file contradicts); ``a_clip``: the linear
    layers' per-token activation range, ``minmax`` (default) or ``gaussian`` (Max's MSE-optimal uniform step
    on the token's mean and std, :func:`~.quant.quantize_tokens_gaussian`). With ``ampn_avg_bits``
    the activation bits come from AMPN: sensitivities on ``calib_size`` noised train digits, exact DP
    allocation over ``ampn_choices`` (default 1..4) under the average-bit budget; the allocation is
    kept on the model as ``robuq_bits``. Sensitivities are measured on the post-training-quantised
    model (the paper measures them after ~1k QAT steps). ``packed``: a :func:`~.model.pack_model` export, as a path
    (in a spec, a ``{file:, sha256:}`` value, which the engine resolves and verifies before calling)."""
    if attention_bits != "auto" and attention_bits is not None and (
            not isinstance(attention_bits, int) or isinstance(attention_bits, bool) or not 2 <= attention_bits <= 16):
        raise ValueError(f"transform_config.attention_bits: expected 2..16, null (FP) or auto, got {attention_bits!r}")
    if packed is not None:
        if not isinstance(packed, Path):
            raise ValueError(f"transform_config.packed: expected a shipped file, written {{file: <path>, sha256: <64-hex>}} "
                             f"(the engine verifies it), got {packed!r}")
        q = _load_packed_into(model, packed)  # the file's layout (attention bits included) rules
        packed = packed.name  # type: ignore[assignment] - messages name the file
        _refuse_layout_conflicts(q, packed, a_bits=a_bits, hadamard=hadamard, block=block, lowrank_rank=lowrank_rank, weight=weight,
                                 adaln=adaln, a_clip=a_clip, ampn_avg_bits=ampn_avg_bits, ampn_choices=ampn_choices)
        if attention_bits != "auto":
            in_file = set(attention_bits_of(q).values()) or {None}  # files written before the attention quantiser: FP
            if in_file != {attention_bits}:
                shown = ", ".join(sorted("null (FP)" if b is None else str(b) for b in in_file))
                raise ValueError(f"transform_config.attention_bits: {attention_bits} conflicts with the packed file {packed} "
                                 f"(attention bits {shown}); omit attention_bits to use the file's")
        return q
    if attention_bits == "auto":
        attention_bits = 8
    if weight not in ("ternary", "fp", "int4"):
        raise ValueError(f"transform_config.weight: expected ternary, fp or int4, got {weight!r}")
    if a_bits is not None and not 1 <= int(a_bits) <= 16:
        raise ValueError(f"transform_config.a_bits: expected 1..16 or null, got {a_bits}")
    if a_clip not in ("minmax", "gaussian"):
        raise ValueError(f"transform_config.a_clip: expected minmax or gaussian, got {a_clip!r}")
    install_quantizers(model, a_bits, hadamard, block, lowrank_rank, weight, adaln, attention_bits, a_clip)  # type: ignore[arg-type]
    if ampn_avg_bits is not None:
        ampn_allocate(model, float(ampn_avg_bits), ampn_choices, calib_size, calib_seed)
    return model.eval()


def ampn_allocate(model: Any, avg_bits: float, choices: list[int] | None = None, calib_size: int = 64, calib_seed: int = 0) -> dict[str, int]:
    """AMPN on an installed quantised DiT, in place: per-group sensitivities ``s_l(b)`` (output MSE on
    ``calib_size`` noised train digits with only group l quantised to b bits), the exact DP allocation
    over ``choices`` (default 1..4) under ``avg_bits``, and the bits set. Measured on the model as it is:
    post-training by :func:`quantize_dit`; after a QAT warm-up in :func:`~.train.train_qat` (the
    paper's protocol: sensitivities after ~1k QAT steps). Keeps ``robuq_bits`` / ``robuq_sensitivities``."""
    choices = list(choices or [1, 2, 3, 4])
    xt, t, y, _ = digits_eps_batch(calib_size, calib_seed)
    was_training = model.training
    model.eval()
    sens = measure_sensitivities(model, lambda m: m(xt, t, class_labels=y).sample, choices)
    model.train(was_training)
    costs = group_costs(model)
    names = list(layer_groups(model))
    bits, _ = allocate_bits([sens[g] for g in names], [costs[g] for g in names], choices, float(avg_bits))
    set_group_bits(model, dict(zip(names, bits)))
    model.robuq_bits = dict(zip(names, bits))
    model.robuq_sensitivities = sens
    return model.robuq_bits


def _refuse_layout_conflicts(q: Any, packed: str, **given: Any) -> None:
    """A packed file carries its layout, so a layout argument set away from :func:`quantize_dit`'s default must agree
    with every quantised linear of the file (adaLN layers, always W4A4, aside); otherwise one line naming it. (An
    argument left at its default cannot be told from an unset one and takes the file's value.)"""
    defaults = {k: v.default for k, v in inspect.signature(quantize_dit).parameters.items() if k in given}
    everything = quant_modules(q)
    mods = [m for n, m in everything.items() if not n.endswith(ADALN)]
    # per key: (the module's stored value, the value the argument would have given that module)
    stored: dict[str, Callable[[Any, Any], tuple[Any, Any]]] = {
        "a_bits": lambda m, v: (m.a_bits, v), "hadamard": lambda m, v: (m.hadamard, v), "weight": lambda m, v: (m.weight_mode, v),
        "a_clip": lambda m, v: (m.a_clip, v),
        "block": lambda m, v: (m.block, hadamard_block(m.in_features, v) if m.hadamard else None),
        "lowrank_rank": lambda m, v: (m.lowrank_rank, min(int(v), m.in_features, m.out_features))}
    for key, value in given.items():
        if value == defaults[key]:
            continue
        if key in ("ampn_avg_bits", "ampn_choices"):
            raise ValueError(f"transform_config.{key}: the packed file {packed} already holds its AMPN allocation; omit {key}")
        if key == "adaln":
            pairs = [(any(n.endswith(ADALN) for n in everything), value)]
        else:
            pairs = [stored[key](m, value) for m in mods]
        if any(have != want for have, want in pairs):
            shown = ", ".join(sorted({str(have) for have, _ in pairs}))
            raise ValueError(f"transform_config.{key}: {value} conflicts with the packed file {packed} ({key} {shown}); "
                             f"omit {key} to use the file's")


def _load_packed_into(model: Any, packed: Path) -> Any:
    """The packed export at ``packed`` rebuilt on ``model``'s architecture, with ``robuq_bits`` per group."""
    if not packed.is_file():
        raise ValueError(f"transform_config.packed: {packed} does not exist")
    q = load_packed(packed, lambda: model)
    bits = {g: q.get_submodule(names[0]).a_bits for g, names in layer_groups(q).items()}
    q.robuq_bits = bits
    return q


@dataclass
class QuantSampleOutput(ImageOutput):
    """``samples`` (N, 1, 8, 8) in [-1, 1] scale; ``labels`` (N,); ``bits`` -- the role's per-group activation bits (None = FP)."""

    labels: Any = None
    bits: Any = None


class QuantDigitsSampler(Procedure):
    """Class-conditional DDIM samples of the shared digits DiT from the role ``role`` (FP or quantised)."""

    kind = "sampler"
    # Not batch-independent: per-token rounding is discontinuous, so the last-ulp differences between
    # batched and single-row matmul kernels flip some rounding decisions and grow over the DDIM chain
    # (measured: 4e-6 with Hadamard, 0.17 without, on DDIM-20). Rows are computed independently otherwise.
    batch_independent = False

    Params = QuantDigitsSamplerParams

    def __call__(self, *, seed: int = 0, labels: Batch = None, noise: Batch = None, progress: bool = False) -> QuantSampleOutput:
        from zoo.common.digits import sample_digits

        p = self.params
        model = self.models[p.role]
        if labels is None:
            labels = torch.arange(10).repeat_interleave(p.per_class)
        labels = torch.as_tensor(labels, dtype=torch.int64).reshape(-1)
        with torch.no_grad():
            x = sample_digits(model, labels, p.num_inference_steps, "ddim", seed, p.guidance_scale, noise=noise, progress=progress)
        return QuantSampleOutput(samples=x, labels=labels, bits=getattr(model, "robuq_bits", None))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        g = torch.Generator().manual_seed(5)
        return {"labels": torch.arange(batch_size) % 10, "noise": torch.randn((batch_size, 1, 8, 8), generator=g)}

    def input_rows(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**inputs, "labels": inputs["labels"][i : i + 1], "noise": inputs["noise"][i : i + 1]} for i in range(inputs["labels"].shape[0])]

    def output_rows(self, outputs: Any) -> list[Any]:
        return [QuantSampleOutput(samples=outputs.samples[i : i + 1], labels=outputs.labels[i : i + 1], bits=outputs.bits)
                for i in range(outputs.samples.shape[0])]

    CliInputs = QuantDigitsSamplerCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        """``zoo run robuq --per-class 10 --out digits.png``: sample every digit, then the digits classifier's
        accuracy on the conditioning labels and the PCA-20 Frechet distance to the test split."""
        from zoo.common.digits import digits_classifier, frechet_distance, save_digit_grid

        ci = inputs if inputs is not None else self.CliInputs()
        run = self if ci.per_class is None else self.with_params(per_class=ci.per_class)
        out = run(seed=seed, progress=True)
        p = run.params
        if out.bits is None:
            bits = "full precision"
        else:
            values = list(out.bits.values()) if isinstance(out.bits, dict) else list(out.bits) if isinstance(out.bits, (list, tuple)) else [out.bits]
            bits = f"activation bits {'/'.join(str(b) for b in sorted(set(values)))} over {len(values)} groups"
        head = f"{p.role}: {out.samples.shape[0]} digits ({p.per_class} per class), DDIM-{p.num_inference_steps}, {bits}"
        lines = [head, summarize(out),
                 f"  digits-classifier accuracy on the conditioning labels: {digits_classifier().accuracy(out.samples, out.labels):.3f}",
                 f"  Frechet distance (PCA-20) to the test split: {frechet_distance(out.samples):.3f}"]
        if ci.out:
            lines.append(f"  wrote {save_digit_grid(out.samples, out.labels, ci.out, per_class=min(p.per_class, 10), title=head)}")
        return "\n".join(lines)


def qat_finetune(model: Any, steps: int, lr: float, batch: int, seed: int = 0, progress: bool = False) -> list[float]:
    """QAT in place: AdamW (no weight decay, gradient norm clipped at 1) on the DDPM epsilon loss of
    the digits train split, ``steps`` minibatches of ``batch`` drawn from ``seed``. Returns the losses."""
    from zoo.common.digits import digits_split, make_scheduler
    from zoo.common.training import ddpm_eps_loss, progress as bar

    s = digits_split()
    ab = make_scheduler("ddpm").alphas_cumprod
    g = torch.Generator().manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=lr, weight_decay=0.0)
    losses = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # diffusers' label embedding drops labels (CFG) with the global RNG in train mode
        for _ in (bar(range(steps), "robuq QAT") if progress else range(steps)):
            loss = ddpm_eps_loss(model, s.x_train, ab, batch, g, labels=s.y_train)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
    model.eval()
    return losses


@dataclass
class QATOutput(ProcedureOutput):
    """``before`` / ``after``: held-out epsilon-MSE of the quantised role; ``losses``: training loss every step; ``config``."""

    before: float
    after: float
    losses: list[float]
    config: dict[str, Any]


class QATDigits(Procedure):
    """QAT fine-tuning (AdamW, DDPM epsilon loss, straight-through gradients through the ternary
    weights and activation quantisers; the low-rank branch trains in FP) of a private copy of
    ``role`` on the digits train split (:func:`qat_finetune`)."""

    kind = "training"
    mutates_models = False

    Params = QATDigitsParams

    def __call__(self, *, seed: int = 0, progress: bool = False) -> QATOutput:
        p = self.params
        model = private_copies(self.models, [p.role])[p.role]
        before = heldout_eps_mse(model, p.n_eval)
        losses = qat_finetune(model, p.steps, p.lr, p.batch, seed, progress)
        return QATOutput(before=before, after=heldout_eps_mse(model, p.n_eval), losses=losses, config=p.model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 2, "batch": 4, "n_eval": 8}


class DiTLatentSampler(Procedure):
    """Class-conditional sampling of a latent DiT (the paper's DiT-XL/2-256: ``dit`` + ``vae`` roles), as
    diffusers' ``DiTPipeline``: DDIM on ``(4, s, s)`` latents with classifier-free guidance (null class =
    ``num_embeds_ada_norm``), learned-sigma channels dropped, then ``vae.decode(z / 0.18215)``."""

    kind = "sampler"

    Params = DiTLatentSamplerParams

    def __call__(self, *, seed: int = 0, class_labels: Batch = (207, 360), progress: bool = False) -> ImageOutput:
        from zoo.common.digits import make_scheduler
        from zoo.common.scheduler_loop import run_scheduler_loop

        p = self.params
        dit, vae = self.models[p.role], self.models["vae"]
        labels = torch.as_tensor(class_labels, dtype=torch.int64).reshape(-1)
        null = int(dit.config.num_embeds_ada_norm)
        labels = labels.clamp(0, null - 1)
        c, s = int(dit.config.in_channels), int(dit.config.sample_size)
        g = torch.Generator().manual_seed(int(seed))
        dtype = next(dit.parameters()).dtype
        noise = torch.randn((labels.shape[0], c, s, s), generator=g).to(dtype)
        with torch.no_grad():
            z = run_scheduler_loop(make_scheduler("ddim"), dit, noise, p.num_inference_steps, model_kwargs={"class_labels": labels},
                                   guidance_scale=p.guidance_scale, uncond_kwargs={"class_labels": torch.full_like(labels, null)}, progress=progress)
            img = vae.decode((z / p.vae_scale).to(next(vae.parameters()).dtype)).sample
        return ImageOutput(samples=img.clamp(-1, 1))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"class_labels": list(range(batch_size)), "num_inference_steps": 2}
