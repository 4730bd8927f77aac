"""The DPLM-Evo network (arXiv 2605.00182, Sec. 3 "Network"): an ESM-2 / DPLM transformer
(transformers ``EsmModel`` + ``EsmLMHead``, the layout of DPLM's ``EsmForDPLM``) with three heads per
observed token ``k`` of the collapsed sequence ``x_t``:

* substitution ``p_sub(· | x_t)_k`` over the 20 amino acids (the LM head's logits at :func:`~.alphabet.aa_ids`);
* deletion ``p_del_k = σ(w_delᵀ h_k + b_del)``;
* right-insertion ``p_ins`` per *gap* (:mod:`zoo.common.varlen` convention: gap ``g`` lies before slot ``g``):
  gap ``k + 1`` (right of token ``k``) reads ``h_k``, and gap 0 (before the first token) reads the ``<cls>``
  state, so every one of the ``n + 1`` gaps of a length-``n`` row has a head [recon: the paper's head is
  "insert to the right of ``k``"; gap 0 via ``<cls>`` is this implementation's choice].

Inputs are rows of alphabet indices ``0..19`` and :data:`MASK` (``20``), right-padded with :data:`PAD`;
the network sees ``<cls> x <eos>`` in ESM ids. The gap symbol φ (:data:`GAP`) never reaches it.

Factories: :func:`build_toy` (tiny ``EsmConfig``) and :func:`build_dplm_150m` (ESM-2 150M shape, DPLM's
``airkingbd/dplm_150m``); :func:`from_dplm` converts DPLM's ``EsmForDPLM`` state dict (the edit heads are
new: initialised to weight 0 and bias :data:`EDIT_HEAD_BIAS`, i.e. untrained).
"""
from __future__ import annotations

import torch
from torch import nn

from registry.contract import converter, factory

from .alphabet import AA, CLS_ID, EOS_ID, ESM_VOCAB, MASK_ID, PAD_ID, aa_ids
from .params import FullConfig, ToyConfig

__all__ = ["MASK", "GAP", "PAD", "EDIT_HEAD_BIAS", "DPLMEvoNet", "build_toy", "build_dplm_150m", "from_dplm", "to_dplm"]

MASK, GAP, PAD = 20, 21, 22  # latent / row states beyond the 20 residues
EDIT_HEAD_BIAS = -3.0  # a warm-started model's untrained del/ins heads: p = σ(-3) ≈ 0.047 everywhere


class DPLMEvoNet(nn.Module):
    """``EsmModel`` + ``EsmLMHead`` + ``Linear(d, 1)`` deletion and insertion heads."""

    def __init__(self, config, zero_edit_heads: bool = False):
        super().__init__()
        from transformers.models.esm.modeling_esm import EsmLMHead, EsmModel

        self.config = config
        self.esm = EsmModel(config, add_pooling_layer=False)
        self.lm_head = EsmLMHead(config)
        self.del_head = nn.Linear(config.hidden_size, 1)
        self.ins_head = nn.Linear(config.hidden_size, 1)
        if zero_edit_heads:
            with torch.no_grad():
                for h in (self.del_head, self.ins_head):
                    h.weight.zero_()
                    h.bias.fill_(EDIT_HEAD_BIAS)
        table = torch.full((PAD + 1,), PAD_ID, dtype=torch.long)
        table[: len(AA)] = aa_ids()
        table[MASK] = MASK_ID
        self.register_buffer("state_to_token", table, persistent=False)
        self.register_buffer("aa_token_ids", aa_ids(), persistent=False)

    def forward(self, rows: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``rows [B, L]`` (states ``0..20``, :data:`PAD` beyond ``lengths``) -> ``(sub_logits [B, L, 20],
        del_logit [B, L], ins_logit [B, L + 1])`` (gap-indexed insertion logits)."""
        b, width = rows.shape
        tok = self.state_to_token[rows.clamp(0, PAD)]
        ids = torch.full((b, width + 2), PAD_ID, dtype=torch.long, device=rows.device)
        ids[:, 0] = CLS_ID
        ids[:, 1 : width + 1] = tok
        ids[torch.arange(b, device=rows.device), lengths + 1] = EOS_ID
        attn = torch.arange(width + 2, device=rows.device)[None, :] < (lengths + 2)[:, None]
        h = self.esm(input_ids=ids, attention_mask=attn.long()).last_hidden_state
        logits = self.lm_head(h[:, 1 : width + 1])
        sub = logits.index_select(-1, self.aa_token_ids)
        return sub, self.del_head(h[:, 1 : width + 1]).squeeze(-1), self.ins_head(h[:, : width + 1]).squeeze(-1)


def _config(**kw):
    from transformers import EsmConfig

    return EsmConfig(vocab_size=len(ESM_VOCAB), pad_token_id=PAD_ID, mask_token_id=MASK_ID,
                     position_embedding_type="rotary", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


@factory(params=ToyConfig)
def build_toy(**config) -> DPLMEvoNet:
    """Tiny ESM-2-architecture DPLM-Evo network (random init; weights come from the spec)."""
    cfg = ToyConfig(**config)
    torch.manual_seed(0)
    return DPLMEvoNet(_config(token_dropout=False, **cfg.model_dump())).eval()


@factory(params=FullConfig)
def build_dplm_150m(**config) -> DPLMEvoNet:
    """DPLM 150M's architecture with zero-weight del/ins heads (bias :data:`EDIT_HEAD_BIAS`): the heads are
    new in DPLM-Evo, so a warm start has them untrained (``needs-training``)."""
    cfg = FullConfig(**config)
    torch.manual_seed(0)
    return DPLMEvoNet(_config(layer_norm_eps=1e-5, emb_layer_norm_before=False, **cfg.model_dump()), zero_edit_heads=True).eval()


def to_dplm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`from_dplm`: our state dict in DPLM's ``EsmForDPLM`` key layout (edit heads dropped)."""
    return {k: v for k, v in state.items() if not k.startswith(("del_head.", "ins_head."))}


@converter(inverse=to_dplm)
def from_dplm(state: dict) -> dict[str, torch.Tensor]:
    """DPLM's checkpoint (``EsmForDPLM``: ``esm.*``, ``lm_head.*``; possibly nested under ``state_dict`` /
    prefixed ``net.`` / ``model.``) -> :class:`DPLMEvoNet` keys. Pooler weights and position-id buffers are
    dropped, a tied LM decoder is filled from the word embeddings, and the new del/ins heads are initialised
    to weight 0, bias :data:`EDIT_HEAD_BIAS` [unverified: the hub file's exact key set could not be read offline]."""
    if "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        for prefix in ("model.", "net."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        if k.startswith("esm.pooler.") or k.endswith("position_ids"):
            continue
        out[k] = v
    if "lm_head.decoder.weight" not in out and "esm.embeddings.word_embeddings.weight" in out:
        out["lm_head.decoder.weight"] = out["esm.embeddings.word_embeddings.weight"]
    hidden = out["esm.embeddings.word_embeddings.weight"].shape[1]
    dtype = out["esm.embeddings.word_embeddings.weight"].dtype
    for h in ("del_head", "ins_head"):
        out.setdefault(f"{h}.weight", torch.zeros(1, hidden, dtype=dtype))
        out.setdefault(f"{h}.bias", torch.full((1,), EDIT_HEAD_BIAS, dtype=dtype))
    return out
