"""Where a trained FlexMDM toy generator gets the length process wrong (docs/methods/loflexmdm.NOTES.md, "Diagnosis").

:func:`length_diagnosis` samples ``samples`` unconditional rows with the plain τ-leaping sampler and returns, as
text, (1) the sampled length histogram next to the task's exact law, (2) per t bin and current length k, along the
sampler's own trajectories, ``model/exact (row-steps)``: the remaining insertions implied by the generator's total
insertion rate vs the exact ``E[L - k | k, t]`` (:func:`~.metrics.insertion_calibration`), (3) the same two on
complete clean data rows near the clean end (t = 0.9 ... 0.999), where the hazard ``1/(1 - t)`` turns any
non-vanishing remainder ``c`` into ``c · ln((1 - t_0)/(1 - t_end))`` spurious insertions. The length process is a
pure birth process, so the length law is right iff model and exact agree wherever trajectories go. Meaningful for
the shared-schedule ``flexmdm`` spec (LoFlexMDM's per-position schedules make the total rate content-dependent)::

    import zoo
    from zoo.methods.loflexmdm.diagnostics import length_diagnosis
    print(length_diagnosis(zoo.load("flexmdm", variant="toy").models["model"]))              # 2000 samples, 128 steps
    print(length_diagnosis(zoo.load("flexmdm", variant="toy-brackets").models["model"], steps=512))

Other weights (e.g. from ``zoo train flexmdm --out-dir D``): ``build_model(**config)`` with the variant's config,
``load_state_dict(safetensors.torch.load_file(...))``, then pass that model.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import torch

from .metrics import insertion_calibration, length_tv, sample_texts, task_of
from .oracle import OracleLengthModel
from .sampler import SamplerConfig

__all__ = ["length_diagnosis"]


def length_diagnosis(model: Any, samples: int = 2000, steps: int = 128, seed: int = 0,
                     t_bins: Sequence[float] = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0), label: str = "") -> str:
    """The three length-process tables of the module docstring for ``model`` (a toy generator), as text."""
    task = task_of(model)
    texts, _ = sample_texts(model, samples, SamplerConfig(max_steps=steps), seed)
    hist = collections.Counter(map(len, texts))
    law = task.length_law()
    out = [f"{label + ' ' if label else ''}{steps} steps, {samples} samples: length TV {length_tv(texts, task):.3f}",
           "length  sampled  exact"]
    out += [f"{k:6d}  {hist.get(k, 0) / samples:7.3f}  {law.get(k, 0.0):5.3f}" for k in sorted(set(hist) | set(law))]
    table = insertion_calibration(model, samples, steps, seed)
    out.append("t bin: k=model/exact(row-steps) for k with >= 30 row-steps (remaining insertions)")
    for tb in t_bins:
        cells = [f"k={k}:{m:.2f}/{e:.2f}({c})" for (t, k), (m, e, c) in table.items() if abs(t - tb) < 1e-9 and c >= 30]
        out.append(f"t~{tb:.2f} " + " ".join(cells))
    tok = model.zoo_tokenizer
    oracle = OracleLengthModel(law, tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols])
    z1, _, valid = task.encode_latents(task.sample_texts(samples, torch.Generator().manual_seed(seed)), tok)
    k = valid.sum(1) - 1
    out.append("complete clean data rows: L=model/exact remaining insertions")
    for t0 in (0.9, 0.97, 0.99, 0.997, 0.999):
        t = torch.full((len(k),), t0)
        with torch.no_grad():
            _, b_in, _ = model.generator_rates(z1, valid, t)
        total, exact = (b_in * valid).sum(1), oracle.expected_remaining(k, t)
        out.append(f"t={t0:<5} " + " ".join(f"L{L}:{total[k == L].mean():.3f}/{exact[k == L].mean():.3f}"
                                             for L in sorted(law) if (k == L).any()))
    return "\n".join(out)
