"""How CoDiLA's shipped toy checkpoints are made (``zoo train codila [--check] [--only toy|toy-trap]``).

For the toy task of each training entry (``xor``: XOR-words, variant ``toy``; ``trap``: the top-1
counterexample, variant ``toy-trap``; ``stretch``: low-entropy stretches, variant ``toy-stretch``; :mod:`.tasks`):

1. the drafter, a tiny bidirectional masked denoiser, with the MDLM/LLaDA loss (Sahoo et al. 2024,
   arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992);
2. with the DLM frozen, the local AR (a tiny ``Qwen2ForCausalLM``) on block-masked inputs soft-conditioned on
   the DLM's marginals (CoDiLA, arXiv 2603.20216, Sec. 3);
3. the same AR conditioned on the top-1 of the marginals only (the Theorem 3.3 ablation, sampler ``codila-topk``;
   not for ``stretch``, option ``top1: false``).

Each writes ``codila-<task>-{dlm,ar,ar-top1}.safetensors``. Seeds: ``ctx.seed + 100 * i`` for the ``i``-th task of
:data:`~.tasks.TASKS` (0 for ``xor``, 100 for ``trap``, 200 for ``stretch`` under ``zoo train``). Byte-for-byte deterministic on one
thread (~1-1.5 min per task).
"""
from __future__ import annotations

import sys
import time
from typing import Any

from registry.contract import trainer

from .params import ToyTrainOptions

MAX_BLOCK = 4  # the AR is trained on blocks of 1..4 positions (static B = 2 and B = 4 both use it)
GRID = 2  # block starts on the grid of the smallest static block (B = 2: the words)


def file_names(task: str) -> list[str]:
    """The three files of one toy task: the DLM, the soft-conditioned AR, the top-1-conditioned AR."""
    return [f"codila-{task}-dlm.safetensors", f"codila-{task}-ar.safetensors", f"codila-{task}-ar-top1.safetensors"]


def train_task(name: str, seed: int, opts: ToyTrainOptions, bar: bool = True) -> dict[str, Any]:
    """The models of one toy task, trained from generator seed ``seed``: ``{file name: model}`` for the DLM, the
    soft-conditioned AR and (``opts.top1``) the top-1-conditioned AR, in that order. The trainer below saves them;
    the benchmark calls it for further training seeds."""
    from zoo.common.training import setup_deterministic

    from .sampler import excluded_ids
    from .tasks import Task
    from .toy import build_dlm, build_local_ar, toy_tokenizer
    from .training import sample_batch, train_dlm, train_local_ar

    task = Task(name)
    tok = toy_tokenizer(name)
    g = setup_deterministic(seed)
    files = file_names(name)
    out: dict[str, Any] = {}
    t0 = time.time()
    dlm = build_dlm(task=name)  # random init (the factory seeds it); the shipped weights are what this makes
    train_dlm(dlm, task, tok, opts.dlm_steps, opts.batch_size, opts.lr, g, bar=bar)
    for p in dlm.parameters():
        p.requires_grad_(False)
    out[files[0]] = dlm
    print(f"{name} DLM {time.time() - t0:6.1f}s  (seed {seed})", file=sys.stderr)
    ex = excluded_ids(tok, tok.mask_token_id, tok.think_ids, allow_eos=False)
    for fname, cond in ((files[1], "soft"), (files[2], "topk"))[: 2 if opts.top1 else 1]:
        t0 = time.time()
        ar = build_local_ar(task=name)
        train_local_ar(ar, dlm, lambda n, gg: sample_batch(task, tok, n, gg), opts.ar_steps, opts.ar_batch_size,
                       opts.ar_lr, MAX_BLOCK, g, tok.mask_token_id, ex, tok.think_ids, cond, 1,
                       bar=bar, desc=f"AR[{name},{cond}]", grid=GRID)
        out[fname] = ar
        print(f"{name} AR  {time.time() - t0:6.1f}s  (seed {seed}, {cond})", file=sys.stderr)
    return out


def task_seed(name: str, seed: int) -> int:
    """The generator seed of toy task ``name`` for run seed ``seed``: ``seed + 100 * i`` for the i-th task of
    :data:`~.tasks.TASKS`."""
    from .tasks import TASKS

    return seed + 100 * TASKS.index(name)


@trainer(options=ToyTrainOptions)
def train_toy(ctx: Any, opts: ToyTrainOptions) -> None:
    """Train one toy task's DLM, then its soft- (and, with ``top1``, top-1-) conditioned local ARs with the DLM
    frozen, into ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint

    for fname, model in train_task(opts.task, task_seed(opts.task, ctx.seed), opts).items():
        h = save_checkpoint(model, ctx.path(fname), quiet=True)
        print(f"{opts.task}  {fname}  sha256 {h}")
