"""How CoDiLA's shipped toy checkpoints are made (``zoo train codila [--check] [--only toy|toy-trap]``).

For the toy task of each training entry (``xor``: XOR-words, variant ``toy``; ``trap``: the top-1
counterexample, variant ``toy-trap``; :mod:`.tasks`):

1. the drafter, a tiny bidirectional masked denoiser, with the MDLM/LLaDA loss (Sahoo et al. 2024,
   arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992);
2. with the DLM frozen, the local AR (a tiny ``Qwen2ForCausalLM``) on block-masked inputs soft-conditioned on
   the DLM's marginals (CoDiLA, arXiv 2603.20216, Sec. 3);
3. the same AR conditioned on the top-1 of the marginals only (the Theorem 3.3 ablation, sampler ``codila-topk``).

Each writes ``codila-<task>-{dlm,ar,ar-top1}.safetensors``. Seeds: ``ctx.seed + 100 * i`` for the ``i``-th task of
:data:`~.tasks.TASKS` (0 for ``xor``, 100 for ``trap`` under ``zoo train``). Byte-for-byte deterministic on one
thread (~1-1.5 min per task).
"""
from __future__ import annotations

import time
from typing import Any

from registry.contract import trainer

from .params import ToyTrainOptions

MAX_BLOCK = 4  # the AR is trained on blocks of 1..4 positions (static B = 2 and B = 4 both use it)
GRID = 2  # block starts on the grid of the smallest static block (B = 2: the words)


def file_names(task: str) -> list[str]:
    """The three files of one toy task: the DLM, the soft-conditioned AR, the top-1-conditioned AR."""
    return [f"codila-{task}-dlm.safetensors", f"codila-{task}-ar.safetensors", f"codila-{task}-ar-top1.safetensors"]


@trainer(options=ToyTrainOptions)
def train_toy(ctx: Any, opts: ToyTrainOptions) -> None:
    """Train one toy task's DLM, then its soft- and top-1-conditioned local ARs with the DLM frozen, into
    ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint, setup_deterministic

    from .sampler import excluded_ids
    from .tasks import TASKS, Task
    from .toy import build_dlm, build_local_ar, toy_tokenizer
    from .training import sample_batch, train_dlm, train_local_ar

    name = opts.task
    task = Task(name)
    tok = toy_tokenizer(name)
    g = setup_deterministic(ctx.seed + 100 * TASKS.index(name))
    files = file_names(name)
    t0 = time.time()
    dlm = build_dlm(task=name)  # random init (the factory seeds it); the shipped weights are what this makes
    train_dlm(dlm, task, tok, opts.dlm_steps, opts.batch_size, opts.lr, g)
    for p in dlm.parameters():
        p.requires_grad_(False)
    h = save_checkpoint(dlm, ctx.path(files[0]), quiet=True)
    print(f"{name} DLM {time.time() - t0:6.1f}s  {files[0]}  sha256 {h}")
    ex = excluded_ids(tok, tok.mask_token_id, tok.think_ids, allow_eos=False)
    for fname, cond in ((files[1], "soft"), (files[2], "topk")):
        t0 = time.time()
        ar = build_local_ar(task=name)
        train_local_ar(ar, dlm, lambda n, gg: sample_batch(task, tok, n, gg), opts.ar_steps, opts.ar_batch_size,
                       opts.ar_lr, MAX_BLOCK, g, tok.mask_token_id, ex, tok.think_ids, cond, 1,
                       desc=f"AR[{name},{cond}]", grid=GRID)
        h = save_checkpoint(ar, ctx.path(fname), quiet=True)
        print(f"{name} AR  {time.time() - t0:6.1f}s  {fname}  sha256 {h}")
