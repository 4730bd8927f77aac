"""Module surgery on a diffusers ``DiTTransformer2DModel``, AMPN bit allocation and the packed export.

Precision layout (RobuQ, arXiv 2509.23582, the note's sec. 4.1): in every transformer block the
attention ``to_q/to_k/to_v`` (the original DiT's fused ``attn.qkv``; the three share one input, so one
activation bit-width), ``attn1.to_out.0`` (``attn.proj``), ``ff.net.0.proj`` (``mlp.fc1``) and
``ff.net.2`` (``mlp.fc2``) get ternary weights, Hadamard-rotated per-token activations and the FP
low-rank branch; the adaLN modulation ``norm1.linear`` is W4A4; the patch/timestep/label embedders and
the output layers stay FP; the attention products (QK^T and softmax V) get 8-bit per-token operands
through :class:`~.attention.QuantAttnProcessor` (``attention_bits``; ``None`` = FP, diffusers' stock processor).

AMPN (activation-only mixed precision): per-layer activation bits ``b_l`` in ``choices`` minimising
``sum_l s_l(b_l)`` subject to ``sum_l c_l b_l <= avg_bits * sum_l c_l`` (a multiple-choice knapsack,
solved exactly by dynamic programming over the integer cost; the note's sec. 4.2 item 6, cost =
in x out features per token, reconstructed).
"""
from __future__ import annotations

import itertools
import json
import math
from functools import reduce
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from .attention import QuantAttnProcessor, attention_bits_of, install_attention_quantizers
from .quant import QuantLinear, int_codes, ternary_codes

__all__ = [
    "GROUP_KINDS", "layer_groups", "install_quantizers", "quant_modules", "set_group_bits", "set_enabled", "allocate_bits",
    "brute_force_bits", "group_costs", "measure_sensitivities", "pack_model", "load_packed", "packed_state", "unpack_state",
]

GROUP_KINDS: dict[str, tuple[str, ...]] = {
    "qkv": ("attn1.to_q", "attn1.to_k", "attn1.to_v"),
    "proj": ("attn1.to_out.0",),
    "fc1": ("ff.net.0.proj",),
    "fc2": ("ff.net.2",),
}
ADALN = "norm1.linear"


def _get(model: nn.Module, name: str) -> nn.Module:
    return model.get_submodule(name)


def _set(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


def layer_groups(model: nn.Module) -> dict[str, list[str]]:
    """``{"blocks.<i>.<kind>": [module names]}`` for every transformer block (kinds of :data:`GROUP_KINDS`)."""
    blocks = getattr(model, "transformer_blocks", None)
    if blocks is None:
        raise ValueError("expected a diffusers DiTTransformer2DModel (no transformer_blocks)")
    return {f"blocks.{i}.{k}": [f"transformer_blocks.{i}.{n}" for n in names] for i in range(len(blocks)) for k, names in GROUP_KINDS.items()}


def install_quantizers(model: nn.Module, a_bits: int | None = 4, hadamard: bool = True, block: int | None = None, lowrank_rank: int = 8,
                       weight: str = "ternary", adaln: bool = True, attention_bits: int | None = 8, a_clip: str = "minmax") -> nn.Module:
    """Replace the targeted ``nn.Linear`` of ``model`` (in place) by :class:`QuantLinear`, give every block's
    self-attention a :class:`~.attention.QuantAttnProcessor` (``attention_bits``; ``None``: FP products,
    the stock processor's output) and return the model."""
    for names in layer_groups(model).values():
        for n in names:
            lin = _get(model, n)
            if not isinstance(lin, nn.Linear):
                raise ValueError(f"{n}: expected nn.Linear, found {type(lin).__name__}")
            _set(model, n, QuantLinear(lin, weight, a_bits, hadamard, block, lowrank_rank, a_clip))  # type: ignore[arg-type]
    if adaln:
        for i in range(len(model.transformer_blocks)):
            n = f"transformer_blocks.{i}.{ADALN}"
            _set(model, n, QuantLinear(_get(model, n), "int4", 4, False, None, 0))
    install_attention_quantizers(model, attention_bits)
    return model


def quant_modules(model: nn.Module) -> dict[str, QuantLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, QuantLinear)}


def set_enabled(model: nn.Module, enabled: bool) -> nn.Module:
    """Switch every quantised Linear and attention processor on or off (off = the FP computation)."""
    for m in quant_modules(model).values():
        m.enabled = enabled
    for blk in getattr(model, "transformer_blocks", []):
        if isinstance(blk.attn1.processor, QuantAttnProcessor):
            blk.attn1.processor.enabled = enabled
    return model


def set_group_bits(model: nn.Module, bits: Mapping[str, int | None]) -> nn.Module:
    """Set the activation bits of each group of :func:`layer_groups` named in ``bits``."""
    groups = layer_groups(model)
    for g, b in bits.items():
        for n in groups[g]:
            _get(model, n).a_bits = b
    return model


def group_costs(model: nn.Module) -> dict[str, int]:
    """Per-token multiply count ``sum in x out`` of each group, divided by their common gcd (integers for the DP)."""
    raw = {g: sum(_get(model, n).in_features * _get(model, n).out_features for n in names) for g, names in layer_groups(model).items()}
    d = reduce(math.gcd, raw.values())
    return {g: c // d for g, c in raw.items()}


def allocate_bits(sens: Sequence[Sequence[float]], costs: Sequence[int], choices: Sequence[int], avg_bits: float) -> tuple[list[int], float]:
    """Exact AMPN allocation: ``argmin sum_l sens[l][j_l]`` s.t. ``sum_l costs[l] choices[j_l] <= avg_bits sum_l costs[l]``.

    Dynamic programming over layers and the integer spent budget (a multiple-choice knapsack).
    Returns (bits per layer, objective). Raises if even the smallest choice exceeds the budget."""
    L = len(costs)
    if len(sens) != L or any(len(s) != len(choices) for s in sens):
        raise ValueError("sens must be (layers, len(choices))")
    if any(c <= 0 or int(c) != c for c in costs):
        raise ValueError("costs must be positive integers")
    budget = int(math.floor(avg_bits * sum(costs) + 1e-9))
    if sum(c * min(choices) for c in costs) > budget:
        raise ValueError(f"avg_bits {avg_bits} is below the smallest choice {min(choices)}")
    inf = float("inf")
    best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
    for l in range(L):
        nxt: dict[int, tuple[float, tuple[int, ...]]] = {}
        for spent, (obj, picks) in best.items():
            for j, b in enumerate(choices):
                w = spent + costs[l] * b
                if w > budget:
                    continue
                cand = (obj + float(sens[l][j]), picks + (b,))
                if cand[0] < nxt.get(w, (inf, ()))[0]:
                    nxt[w] = cand
        best = nxt
    obj, picks = min(best.values(), key=lambda v: v[0])
    return list(picks), obj


def brute_force_bits(sens: Sequence[Sequence[float]], costs: Sequence[int], choices: Sequence[int], avg_bits: float) -> tuple[list[int], float]:
    """The same problem by enumerating every assignment (reference for small L)."""
    budget = avg_bits * sum(costs) + 1e-9
    best: tuple[float, list[int]] = (float("inf"), [])
    for js in itertools.product(range(len(choices)), repeat=len(costs)):
        if sum(c * choices[j] for c, j in zip(costs, js)) <= budget:
            obj = sum(float(sens[l][j]) for l, j in enumerate(js))
            if obj < best[0]:
                best = (obj, [choices[j] for j in js])
    return best[1], best[0]


@torch.no_grad()
def measure_sensitivities(model: nn.Module, run: Callable[[nn.Module], torch.Tensor], choices: Iterable[int]) -> dict[str, list[float]]:
    """``s_l(b)``: output MSE of ``run(model)`` when only group ``l`` quantises its activations to ``b``
    bits (every other group FP activations), against all-FP activations. Restores the bits afterwards."""
    choices = list(choices)
    groups = layer_groups(model)
    saved = {g: _get(model, names[0]).a_bits for g, names in groups.items()}
    set_group_bits(model, {g: None for g in groups})
    ref = run(model)
    out: dict[str, list[float]] = {}
    for g in groups:
        out[g] = []
        for b in choices:
            set_group_bits(model, {g: b})
            out[g].append(float(((run(model) - ref) ** 2).mean()))
        set_group_bits(model, {g: None})
    set_group_bits(model, saved)
    return out


# ----------------------------------------------------------------------------- packed export
def _pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes (< 2^bits) -> uint8, ``8 // bits`` per byte (little end first), zero-padded."""
    per = 8 // bits
    flat = codes.reshape(-1).to(torch.int32)
    flat = torch.cat([flat, flat.new_zeros((-flat.numel()) % per)]).reshape(-1, per)
    shifts = torch.arange(per, dtype=torch.int32) * bits
    return (flat << shifts).sum(1).to(torch.uint8)


def _unpack(packed: torch.Tensor, bits: int, numel: int) -> torch.Tensor:
    per = 8 // bits
    shifts = torch.arange(per, dtype=torch.int32) * bits
    return ((packed.to(torch.int32)[:, None] >> shifts) & (2 ** bits - 1)).reshape(-1)[:numel]


def packed_state(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The export: ternary weights as 2-bit codes + fp32 per-row scales, int4 weights as 4-bit codes +
    scales, every other tensor as is. Returns (tensors, layout metadata)."""
    tensors: dict[str, torch.Tensor] = {}
    layout: dict[str, Any] = {}
    qm = quant_modules(model)
    for n, m in qm.items():
        if m.frozen:
            raise ValueError(f"{n}: pack the model before freeze() (the codes come from the latent weight)")
        wr = m.rotated_weight().detach()
        if m.weight_mode == "ternary":
            codes, scale = ternary_codes(wr)
            tensors[f"{n}.codes"] = _pack(codes.to(torch.int32) + 1, 2)
            tensors[f"{n}.scale"] = scale.reshape(-1).contiguous()
        elif m.weight_mode == "int4":
            codes, scale = int_codes(wr, 4)
            tensors[f"{n}.codes"] = _pack(codes.to(torch.int32) + 8, 4)
            tensors[f"{n}.scale"] = scale.reshape(-1).contiguous()
        else:
            tensors[f"{n}.w_hat"] = wr.contiguous()
        layout[n] = {"weight_mode": m.weight_mode, "a_bits": m.a_bits, "a_clip": m.a_clip, "hadamard": m.hadamard, "block": m.block,
                     "lowrank_rank": m.lowrank_rank, "shape": [m.out_features, m.in_features]}
    skip = tuple(f"{n}." for n in qm)
    for k, v in model.state_dict().items():
        if k.startswith(skip) and k.rsplit(".", 1)[-1] in ("weight", "w_hat"):
            continue
        tensors[k] = v.detach().contiguous()
    return tensors, layout


def pack_model(model: nn.Module, path: str | Path) -> Path:
    """Write the packed export of a quantised model as safetensors (layout in the metadata)."""
    from safetensors.torch import save_file

    tensors, layout = packed_state(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # ONE metadata key: safetensors writes the metadata map in a per-process (hash) order, so two keys would make
    # the file bytes (and the pinned sha256) differ between runs with identical tensors
    meta = {"robuq": json.dumps({"linear": layout, "attention": attention_bits_of(model)}, sort_keys=True)}
    save_file(tensors, str(path), metadata=meta)
    return path


def unpack_state(tensors: Mapping[str, torch.Tensor], layout: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """``{"<module>.w_hat": weight}`` for every packed quantised module (exact: scale x code)."""
    out = {}
    for n, cfg in layout.items():
        o, i = cfg["shape"]
        if cfg["weight_mode"] == "ternary":
            codes = (_unpack(tensors[f"{n}.codes"], 2, o * i).reshape(o, i) - 1).to(torch.int8)
            out[f"{n}.w_hat"] = tensors[f"{n}.scale"].reshape(o, 1) * codes.to(tensors[f"{n}.scale"].dtype)
        elif cfg["weight_mode"] == "int4":
            codes = (_unpack(tensors[f"{n}.codes"], 4, o * i).reshape(o, i) - 8).to(torch.int8)
            out[f"{n}.w_hat"] = tensors[f"{n}.scale"].reshape(o, 1) * codes.to(tensors[f"{n}.scale"].dtype)
        else:
            out[f"{n}.w_hat"] = tensors[f"{n}.w_hat"]
    return out


def load_packed(path: str | Path, build: Callable[[], nn.Module]) -> nn.Module:
    """Rebuild a quantised model from :func:`pack_model`'s file: ``build()`` gives the FP architecture,
    the layout re-installs the frozen quantised modules and the attention processors (files written
    before the attention quantiser existed carry none: FP attention), and the state loads strictly."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    if "robuq" in meta:
        doc = json.loads(meta["robuq"])
        layout, attention = doc["linear"], doc["attention"]
    else:  # files written before the attention quantiser: the linear layout only
        layout, attention = json.loads(meta["robuq_layout"]), {}
    tensors = load_file(str(path))
    model = build()
    for n, cfg in layout.items():
        q = QuantLinear(_get(model, n), cfg["weight_mode"], cfg["a_bits"], cfg["hadamard"], cfg["block"], cfg["lowrank_rank"], cfg.get("a_clip", "minmax"))
        q.freeze()
        _set(model, n, q)
    for n, bits in attention.items():
        _get(model, n).set_processor(QuantAttnProcessor(bits))
    state = {k: v for k, v in tensors.items() if not k.endswith((".codes", ".scale")) and not (k.endswith(".w_hat") and k[:-6] in layout)}
    state.update(unpack_state(tensors, layout))
    model.load_state_dict(state, strict=True)
    return model.eval()
