"""How UniDFlow's toy checkpoints are made (``zoo train unidflow [--check]``) on the shapes-and-captions world.

Stages (:mod:`.training`): 0 the stand-in backbone (generic masked objective on caption-image pairs, then frozen);
I text alignment (Δu at α ≡ 1 + norm modulation + time MLP on understanding); II vision alignment (Δg at α ≡ 0 on
generation and editing, then the router alone on all three tasks); III mRef-DPO (Δg against the frozen stage-II
reference, generation and editing pairs). The shared-adapter ablation is the stage-I model with its one adapter
trained further on stage II's data. Files written into ``ctx.out_dir``:

* ``unidflow-toy.safetensors``        the final model (stage III)            -> variant ``toy``
* ``unidflow-toy-stage2.safetensors`` the stage-II model = the DPO reference -> variant ``toy-stage2``
* ``unidflow-toy-stage1.safetensors`` after stage I (interference baseline)  -> variant ``toy-stage1``
* ``unidflow-toy-shared.safetensors`` the shared single-adapter ablation, stage II from the stage-I state -> ``shared``

Byte-for-byte deterministic on one thread (~4 min on an idle core).
"""
from __future__ import annotations

import time
from typing import Any

from registry.contract import trainer

from .params import ToyOptions

NAMES = {"toy": "unidflow-toy.safetensors", "toy-stage2": "unidflow-toy-stage2.safetensors",
         "toy-stage1": "unidflow-toy-stage1.safetensors", "toy-shared": "unidflow-toy-shared.safetensors"}


def stage1_model(state: dict[str, Any]) -> Any:
    """A one-adapter model (``shared=True``) holding the stage-I state: Δu at unit scale."""
    from .model import build_unidflow

    model = build_unidflow(shared=True)
    model.load_state_dict({k: v for k, v in state.items() if k in model.state_dict()}, strict=True)
    return model


@trainer(options=ToyOptions)
def train_toy(ctx: Any, opts: ToyOptions) -> None:
    """Stages 0-III and the shared-adapter ablation from seed ``ctx.seed``; the four checkpoints into ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint, setup_deterministic

    from .model import build_unidflow
    from .training import calibrate_router, pretrain_backbone, stage1, stage2, stage3_dpo

    g = setup_deterministic(ctx.seed)
    quiet = opts.quiet

    def save(model: Any, variant: str) -> None:
        h = save_checkpoint(model, ctx.path(NAMES[variant]), quiet=True)
        line = f"{variant:18s} {NAMES[variant]}  sha256 {h}"
        if opts.evaluate:
            from .evaluate import evaluate_all

            line += "  " + " ".join(f"{k}={v:.3f}" for k, v in evaluate_all(model, per_caption=4).items())
        print(line, flush=True)

    t0 = time.time()
    model = build_unidflow()
    pretrain_backbone(model, opts.pretrain_steps, opts.batch_size, opts.lr_backbone, g, quiet)
    stage1(model, opts.stage1_steps, opts.batch_size, opts.lr, g, quiet)
    # the stage-I model is Δu alone at unit scale (no Δg, no router yet): saved as a one-adapter model
    stage1_state = {k: v.clone() for k, v in model.state_dict().items()}
    save(stage1_model(stage1_state), "toy-stage1")
    stage2(model, opts.stage2_steps, opts.batch_size, opts.lr, g, quiet)
    calibrate_router(model, opts.router_steps, opts.batch_size, opts.router_lr, g, quiet)
    save(model, "toy-stage2")
    stage3_dpo(model, opts.dpo_steps, opts.dpo_batch_size, opts.dpo_lr, opts.beta, g, quiet)
    save(model, "toy")
    # the ablation starts from the very stage-I state (one adapter at scale 1 = Δu at α ≡ 1; no Δg, no router)
    shared = stage1_model(stage1_state)
    stage2(shared, opts.stage2_steps, opts.batch_size, opts.lr, g, quiet)
    save(shared, "toy-shared")
    print(f"total {time.time() - t0:.0f} s")
