"""The ``probe`` recipes: the two-stage PROBE recipe (:class:`ProbeRecipe`: stage 1 LoRA probing with the
frozen detector as critic + boundary buffer, stage 2 detector fine-tuning) with its ablations as params,
and :class:`DetectorEval` (balanced accuracy of the shipped detector on every generator)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from registry.contract import Procedure
from registry.results import ProcedureOutput
from zoo.common.digits import digits_split

from .core import GENERATORS, SEEN, UNSEEN, detector_bacc, eval_fakes, finetune_detector, probe_stage1, seen_train_fakes
from .params import DetectorEvalParams, ProbeRecipeCli, ProbeRecipeParams


_MEMO: dict[Any, tuple[list[Any], Any]] = {}


def memo_on_models(models: Any, key: Any, make: Any) -> Any:
    """``make()`` memoised per process for these exact model objects (weak references: a new or collected
    model is a miss) and ``key``; the evaluation and original fakes depend only on the cached roles,
    which no recipe changes (conformance checks it). At most 8 entries are kept."""
    import weakref

    roles = tuple(sorted(k for k in ("dit", "unet") if k in models))
    full = (tuple((r, id(models[r])) for r in roles), key)
    hit = _MEMO.get(full)
    if hit is not None and all(ref() is models[r] for ref, r in zip(hit[0], roles)):
        return hit[1]
    value = make()
    if len(_MEMO) >= 8:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[full] = ([weakref.ref(models[r]) for r in roles], value)
    return value


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def bacc_table(detector: Any, models: Any, n_eval: int, names: tuple[str, ...], fakes: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """Balanced accuracy of ``detector`` per generator on the first ``n_eval`` test digits vs ``n_eval`` held-out fakes."""
    real = digits_split().x_test[:n_eval]
    fakes = fakes if fakes is not None else eval_fakes(models, names, n_eval)
    return {k: detector_bacc(detector, real, fakes[k]) for k in names}


@dataclass
class DetectorEvalOutput(ProcedureOutput):
    """What :class:`DetectorEval` returns: ``bacc`` per generator, ``seen`` (the seen generator's bAcc),
    ``unseen_mean`` (mean over the held-out generators), ``n_eval`` and ``generators`` (name -> description)."""

    bacc: dict[str, float]
    seen: float
    unseen_mean: float
    n_eval: int
    generators: dict[str, str]


class DetectorEval(Procedure):
    """Balanced accuracy of the shipped detector (real test digits vs each generator's held-out fakes)."""

    kind = "analysis"

    Params = DetectorEvalParams

    def __call__(self, *, seed: int = 0, progress: bool = False) -> DetectorEvalOutput:
        names = (SEEN, *UNSEEN)
        table = bacc_table(self.models["detector"], self.models, self.params.n_eval, names)
        return DetectorEvalOutput(bacc=table, seen=table[SEEN], unseen_mean=_mean([table[k] for k in UNSEEN]), n_eval=self.params.n_eval,
                                  generators={k: GENERATORS[k].note for k in names})

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"n_eval": 4}

    def run_cli(self, inputs: Any, seed: int) -> str:
        out = self(seed=seed)
        return "\n".join([f"{k:18s} bAcc {v:.3f}   {out.generators[k]}" for k, v in out.bacc.items()] + [f"unseen mean {out.unseen_mean:.3f}"])


@dataclass
class ProbeOutput(ProcedureOutput):
    """What :class:`ProbeRecipe` returns.

    * ``before`` / ``after`` -- bAcc per generator of the shipped detector and of the stage-2 detector;
      ``seen`` / ``unseen_mean`` -- ``{"before", "after"}`` for the seen generator and the mean over the
      held-out ones; ``gain`` -- ``unseen_mean`` after − before;
    * ``buffer`` -- the boundary buffer ``(n, 1, 8, 8)`` (empty without ``use_buffer``... it is still
      collected, only stage 2 ignores it), ``buffer_labels``, ``buffer_steps``, ``buffer_fake_prob``
      (the frozen detector's mean P(fake) per whole snapshot: the trajectory through the boundary), ``buffer_kept``
      (samples kept per snapshot), ``buffer_size`` (samples in the buffer) and ``buffer_mean_fake_prob`` (the frozen
      detector's mean P(fake) over the buffer's samples; with ``buffer_band`` it lies inside the band),
      ``buffer_sample_fake_prob`` (that P(fake) per buffer sample);
    * ``l_probe`` / ``l_prec`` / ``fake_prob`` -- stage-1 traces per step; ``config``.
    """

    before: dict[str, float]
    after: dict[str, float]
    seen: dict[str, float]
    unseen_mean: dict[str, float]
    gain: float
    buffer: torch.Tensor
    buffer_labels: torch.Tensor
    buffer_steps: list[int]
    buffer_fake_prob: list[float]
    buffer_kept: list[int]
    buffer_size: int
    buffer_mean_fake_prob: float
    buffer_sample_fake_prob: torch.Tensor
    l_probe: list[float]
    l_prec: list[float]
    fake_prob: list[float]
    config: dict[str, Any]


class ProbeRecipe(Procedure):
    """PROBE: stage 1 (LoRA on a private copy of the DiT, steered by the frozen detector through the
    DDIM-10 chain on ``L_probe + λ L_prec``, boundary buffer every ``buffer_every`` steps), stage 2
    (fine-tune a copy of the detector on real + original fakes + buffer), then bAcc on every generator.
    ``use_buffer: false`` is the no-buffer baseline (same stage-2 budget on real + original fakes);
    ``lambda_prec: 0`` the λ = 0 ablation; ``critic: false`` the detector-blind LoRA ablation;
    ``buffer_band: [lo, hi]`` (with ``buffer_size``) the boundary-band buffer (only samples the frozen detector
    scores in the band; :func:`~.core.probe_stage1`). The cached roles are never changed (private copies)."""

    kind = "training"

    Params = ProbeRecipeParams
    CliInputs = ProbeRecipeCli

    def __call__(self, *, seed: int = 0, progress: bool = False) -> ProbeOutput:
        p = self.params
        det, dit = self.models["detector"], self.models["dit"]
        names = (SEEN, *UNSEEN)
        fakes = self.memo_fakes(p.n_eval, names)
        before = bacc_table(det, self.models, p.n_eval, names, fakes)
        run = probe_stage1(dit, det, p.stage1_steps, p.lambda_prec, p.lr, p.batch, p.buffer_every, p.rank, seed, critic=p.critic, progress=progress,
                           buffer_band=p.buffer_band, buffer_size=p.buffer_size, buffer_batch=p.buffer_batch)
        s = digits_split()
        original = self.memo_original(p.n_original)
        tuned = finetune_detector(det, s.x_train[: p.n_original], original, run.buffer if p.use_buffer else None, p.stage2_steps, p.stage2_lr,
                                  seed, progress=progress)
        after = bacc_table(tuned, self.models, p.n_eval, names, fakes)
        um = {"before": _mean([before[k] for k in UNSEEN]), "after": _mean([after[k] for k in UNSEEN])}
        return ProbeOutput(before=before, after=after, seen={"before": before[SEEN], "after": after[SEEN]}, unseen_mean=um,
                           gain=um["after"] - um["before"], buffer=run.buffer, buffer_labels=run.buffer_labels, buffer_steps=run.buffer_steps,
                           buffer_fake_prob=run.buffer_fake_prob, buffer_kept=run.buffer_kept, buffer_size=int(run.buffer.shape[0]),
                           buffer_mean_fake_prob=float(run.buffer_sample_fake_prob.mean()) if run.buffer.shape[0] else float("nan"),
                           buffer_sample_fake_prob=run.buffer_sample_fake_prob, l_probe=run.l_probe, l_prec=run.l_prec, fake_prob=run.fake_prob,
                           config=p.model_dump())

    def memo_fakes(self, n: int, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return memo_on_models(self.models, ("eval", n, names), lambda: eval_fakes(self.models, names, n))

    def memo_original(self, n: int) -> torch.Tensor:
        return memo_on_models(self.models, ("original", n), lambda: seen_train_fakes(self.models["dit"], n))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"stage1_steps": 2, "batch": 2, "buffer_every": 1, "stage2_steps": 2, "n_eval": 4, "n_original": 8}

    def run_cli(self, inputs: Any, seed: int) -> str:
        from .report import format_run, plot_buffer

        out = self(seed=seed, progress=True)
        path = plot_buffer(out, inputs.out if inputs is not None else "probe-buffer.png")
        return format_run(out) + f"\nwrote {path}"
