"""How probe's shipped detector is made (``zoo train probe [--check]``): timm ``test_resnet`` (1 input channel, 2
classes: real, fake) on the digits train split (1,437 real digits) vs 1,437 fakes of the seen generator (the
shared digits DiT, DDIM-10, the train split's labels, seed 100). Cross-entropy on class-balanced minibatches of 128,
AdamW (lr 2e-3, weight decay 1e-4), 600 steps, seed ``ctx.seed``, one CPU thread (:func:`~.core.train_detector`);
BatchNorm running statistics are part of the checkpoint. ~30 s on one idle thread."""
from __future__ import annotations

from typing import Any

from registry.contract import trainer

from .params import DetectorOptions


@trainer(options=DetectorOptions)
def train_shipped_detector(ctx: Any, opts: DetectorOptions) -> None:
    """Train the detector from scratch and write ``probe-detector.safetensors`` into ``ctx.out_dir``."""
    from zoo.common.digits import digits_split
    from zoo.common.training import save_checkpoint, setup_deterministic

    from .core import SEEN, build_detector, detector_bacc, eval_fakes, seen_train_fakes, train_detector

    setup_deterministic(ctx.seed)
    s = digits_split()
    dit = ctx.models("toy", roles=["dit"])["dit"]  # a fresh copy of the shared DiT (specs/digits.yaml)
    fakes = seen_train_fakes(dit)
    detector = build_detector().train()
    losses = train_detector(detector, s.x_train, [fakes], opts.steps, opts.lr, ctx.seed, progress=True, desc="probe detector")
    held = eval_fakes({"dit": dit}, [SEEN], 360)[SEEN]
    print(f"final loss {sum(losses[-50:]) / len(losses[-50:]):.4f}; held-out bAcc on the seen generator "
          f"{detector_bacc(detector, s.x_test, held):.3f}")
    save_checkpoint(detector, ctx.path("probe-detector.safetensors"))
