"""LoRA for every method of the zoo: a small :class:`LoRALinear` with named adapters and a per-call scale.

``y = W x + b + sum_a s_a (alpha_a / r_a) B_a A_a x`` (Hu et al., arXiv 2106.09685, eq. 3), with the
frozen base ``nn.Linear`` kept as is, ``A`` initialised like peft (Kaiming-uniform, a = sqrt(5)) and
``B = 0`` so a fresh adapter leaves the model's outputs unchanged. The scale ``s_a`` of each adapter is
set per call - a float, or a ``(B,)`` tensor broadcast over the batch (first) dimension - which is what
UniDFlow's timestep router needs (``y = W x + alpha_t B_u A_u x + (1 - alpha_t) B_g A_g x``,
``/work/shared/methods/unidflow.md`` section 4) and what peft's ``LoraLayer`` does not offer (its scaling is
a per-adapter constant). Why not peft: see ``docs/architecture.md``, "LoRA".

Use :func:`inject_lora` to wrap the ``nn.Linear`` modules whose qualified names match glob patterns
(e.g. ``"transformer_blocks.*.attn1.to_q"``), :func:`lora_scales` (a context manager) to set scales on
every wrapped layer for the calls inside it, and :func:`lora_parameters` / :func:`lora_state_dict` for
the trainable tensors.
"""
from __future__ import annotations

import contextlib
import fnmatch
import math
from typing import Iterator, Mapping, Sequence

import torch
from torch import nn

__all__ = ["LoRALinear", "inject_lora", "lora_scales", "lora_parameters", "lora_state_dict", "lora_layers"]

Scale = float | torch.Tensor


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus named low-rank adapters with per-call scales."""

    def __init__(self, base: nn.Linear, adapters: Sequence[str] = ("default",), rank: int = 4, alpha: float | None = None):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps nn.Linear, got {type(base).__name__}")
        if rank < 1:
            raise ValueError("rank must be >= 1")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.rank = rank
        self.scaling = (alpha if alpha is not None else rank) / rank
        self.lora_A = nn.ParameterDict()
        self.lora_B = nn.ParameterDict()
        for name in adapters:
            self.add_adapter(name)
        self.scales: dict[str, Scale] = {name: 1.0 for name in adapters}

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def add_adapter(self, name: str) -> None:
        w = self.base.weight
        A = torch.empty(self.rank, self.in_features, dtype=w.dtype, device=w.device)
        nn.init.kaiming_uniform_(A, a=math.sqrt(5))
        self.lora_A[name] = nn.Parameter(A)
        self.lora_B[name] = nn.Parameter(torch.zeros(self.out_features, self.rank, dtype=w.dtype, device=w.device))
        if hasattr(self, "scales"):
            self.scales[name] = 1.0

    def forward(self, x: torch.Tensor, scales: Mapping[str, Scale] | None = None) -> torch.Tensor:
        y = self.base(x)
        use = self.scales if scales is None else scales
        for name, s in use.items():
            if name not in self.lora_A:
                raise KeyError(f"unknown adapter {name!r}; have {list(self.lora_A)}")
            if isinstance(s, (int, float)) and s == 0:
                continue
            delta = (x @ self.lora_A[name].T) @ self.lora_B[name].T
            if isinstance(s, torch.Tensor) and s.ndim > 0:
                s = s.to(delta.dtype).reshape(-1, *([1] * (delta.ndim - 1)))
            y = y + (s * self.scaling) * delta
        return y

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, rank={self.rank}, adapters={list(self.lora_A)}"


def inject_lora(model: nn.Module, targets: Sequence[str], rank: int = 4, alpha: float | None = None, adapters: Sequence[str] = ("default",),
                freeze_base: bool = True) -> list[str]:
    """Replace every ``nn.Linear`` whose qualified name matches one of the glob ``targets`` by a
    :class:`LoRALinear`; with ``freeze_base`` every other parameter of ``model`` is frozen too.
    Returns the wrapped names (ValueError if none matched)."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and any(fnmatch.fnmatchcase(n, t) for t in targets)]
    if not names:
        raise ValueError(f"no nn.Linear matches {list(targets)}")
    if freeze_base:
        for p in model.parameters():
            p.requires_grad_(False)
    for n in names:
        parent_name, _, child = n.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(getattr(parent, child), adapters, rank, alpha))
    return names


def lora_layers(model: nn.Module) -> Iterator[LoRALinear]:
    return (m for m in model.modules() if isinstance(m, LoRALinear))


@contextlib.contextmanager
def lora_scales(model: nn.Module, scales: Mapping[str, Scale]) -> Iterator[None]:
    """Set the adapter scales of every :class:`LoRALinear` in ``model`` inside the block (restored after);
    adapters not named keep scale 0 inside the block."""
    layers = list(lora_layers(model))
    saved = [dict(m.scales) for m in layers]
    try:
        for m in layers:
            m.scales = {name: scales.get(name, 0.0) for name in m.lora_A}
        yield
    finally:
        for m, s in zip(layers, saved):
            m.scales = s


def lora_parameters(model: nn.Module, adapter: str | None = None) -> list[nn.Parameter]:
    """The trainable LoRA tensors (of one adapter, or all)."""
    out = []
    for m in lora_layers(model):
        for name in m.lora_A:
            if adapter is None or name == adapter:
                out += [m.lora_A[name], m.lora_B[name]]
    return out


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the LoRA tensors of ``model.state_dict()`` (for a safetensors adapter file)."""
    return {k: v for k, v in model.state_dict().items() if ".lora_A." in k or ".lora_B." in k}

