"""Masked-diffusion-LM toolkit shared by the discrete methods (PoE-Bridge, CoDiLA, LoFlexMDM, DPLM-Evo).

* :class:`MaskedDenoiser`: one interface over any bidirectional mask predictor, ``logits(ids) ->
  [B, L, V]`` with the prediction for position ``i`` at index ``i``. It handles Dream's shift-by-one
  (Dream reads position ``i`` from output ``i-1`` and duplicates the first output; Ye et al. 2025,
  https://github.com/HKUNLP/Dream), the mask id and a vocabulary limit.
* :func:`confidence_decode`: the standard DLM decoding baseline. Each step runs the denoiser once,
  proposes a token for every masked position of the current semi-autoregressive block, and unmasks the
  ``tokens_per_step`` most confident ones. Confidence rules: LLaDA ``low_confidence`` (= Dream
  ``maskgit_plus``: probability of the proposed token; Nie et al. 2025, arXiv 2502.09992, Alg. 5),
  Dream ``topk_margin`` (top-1 minus top-2 probability) and Dream ``entropy`` (negative entropy).
* :class:`ConfidenceDecoding`: that baseline as a zoo sampler (spec ``dlm-confidence-decoding``).
* Prompt/tokenizer helpers and :class:`GenerationOutput`, shared by the text samplers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from registry.contract import CliInputs, Procedure, ProcedureParams

ALGS = ("low_confidence", "maskgit_plus", "topk_margin", "entropy")


# ----------------------------------------------------------------------------- the interface
class MaskedDenoiser:
    """Logits for every position of a partially masked sequence.

    ``model`` is any module returning logits ``[B, L, V]`` (a tensor or an object with ``.logits``).
    ``shift_logits=True`` for Dream-style models (AR-initialised: output ``i-1`` predicts token ``i``).
    """

    def __init__(self, model: Any, mask_token_id: int, shift_logits: bool = False, vocab_limit: int | None = None):
        self.model = model
        self.mask_token_id = int(mask_token_id)
        self.shift_logits = bool(shift_logits)
        self.vocab_limit = vocab_limit

    @classmethod
    def wrap(cls, model: Any, mask_token_id: int | None = None, shift_logits: bool | None = None,
             vocab_limit: int | None = None) -> "MaskedDenoiser":
        """Infer the mask id (``model.mask_token_id`` or ``model.config.mask_token_id``) and the shift
        (``model.shift_logits``, or ``True`` for ``config.model_type == "Dream"``) when not given."""
        if isinstance(model, MaskedDenoiser):
            return model
        cfg = getattr(model, "config", None)
        if mask_token_id is None:
            mask_token_id = getattr(model, "mask_token_id", None)
            if mask_token_id is None and cfg is not None:
                mask_token_id = getattr(cfg, "mask_token_id", None)
        if mask_token_id is None:
            raise ValueError("masked denoiser: no mask_token_id on the model or its config; pass it explicitly")
        if shift_logits is None:
            shift_logits = getattr(model, "shift_logits", None)
            if shift_logits is None:
                shift_logits = str(getattr(cfg, "model_type", "")).lower() == "dream"
        return cls(model, mask_token_id, shift_logits, vocab_limit)

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids)
        logits = out if isinstance(out, torch.Tensor) else out.logits
        if self.shift_logits:
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        if self.vocab_limit is not None:
            logits = logits[..., : self.vocab_limit]
        return logits.float()


def shift_by_one(logits: torch.Tensor) -> torch.Tensor:
    """Dream's convention: prediction for position i read from output i-1, first output duplicated."""
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


# ----------------------------------------------------------------------------- text helpers
def find_tokenizer(*models: Any) -> Any:
    """The tokenizer attached by a zoo factory (``model.zoo_tokenizer``), else ``AutoTokenizer`` from the
    first model's ``name_or_path`` (local files only: nothing is downloaded)."""
    for m in models:
        tok = getattr(m, "zoo_tokenizer", None)
        if tok is not None:
            return tok
    for m in models:
        path = getattr(getattr(m, "config", None), "_name_or_path", None) or getattr(m, "name_or_path", None)
        if path:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(path)
    raise ValueError("no tokenizer: pass input_ids, or use models that carry one")


def encode_prompt(tok: Any, text: str, chat_template: bool = True) -> list[int]:
    """Token ids of one prompt; instruct tokenizers get their chat template with a generation prompt."""
    if chat_template and getattr(tok, "chat_template", None):
        rendered = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
        return list(tok(rendered, add_special_tokens=False)["input_ids"])
    ids = tok.encode(text)
    return list(ids)


def eos_of(tok: Any, *models: Any) -> int | None:
    if tok is not None and getattr(tok, "eos_token_id", None) is not None:
        return int(tok.eos_token_id)
    for m in models:
        e = getattr(getattr(m, "generation_config", None), "eos_token_id", None) or getattr(getattr(m, "config", None), "eos_token_id", None)
        if isinstance(e, (list, tuple)):
            e = e[0] if e else None
        if e is not None:
            return int(e)
    return None


def resolve_max_new_tokens(value: int | None, *models: Any, fallback: int = 256) -> int:
    """Explicit value, else the first model's ``generation_config.max_new_tokens``, else ``fallback``."""
    if value is not None:
        return value
    for m in models:
        v = getattr(getattr(m, "generation_config", None), "max_new_tokens", None) or getattr(m, "zoo_max_new_tokens", None)
        if v:
            return int(v)
    return fallback


@dataclass
class GenerationOutput:
    """Result of a text sampler: per row, the new token ids (ending at EOS if one was produced), the
    decoded text (when a tokenizer is known) and deterministic counters."""

    token_ids: list[list[int]]
    texts: list[str] | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.texts) if self.texts is not None else repr(self.token_ids)


def split_rows(out: GenerationOutput) -> list[GenerationOutput]:
    return [
        GenerationOutput([ids], None if out.texts is None else [out.texts[i]], [out.stats[i]] if out.stats else [])
        for i, ids in enumerate(out.token_ids)
    ]


def prompt_rows(prompt: Any = None, input_ids: Any = None) -> list[dict[str, Any]]:
    if input_ids is not None:
        rows = input_ids.tolist() if isinstance(input_ids, torch.Tensor) else input_ids
        if rows and isinstance(rows[0], int):
            rows = [rows]
        return [{"input_ids": [list(r)]} for r in rows]
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    return [{"prompt": [p]} for p in prompts]


class TextSampler(Procedure):
    """Shared plumbing of the text samplers: prompt handling, batch rows, CLI."""

    batch_independent = True
    default_prompts = ["347+285=", "512+489="]

    class Cli(CliInputs):
        prompt: str = "347+285="

    CliInputs = Cli

    def _models_for_tokenizer(self) -> list[Any]:
        return list(self.models.values())

    def __call__(self, prompt: Any = None, *, seed: int = 0, input_ids: Any = None) -> GenerationOutput:
        """Decode each prompt row independently with its own generator seeded by ``seed``
        (so row i of a batch equals row i alone)."""
        rows = self.prompts_to_ids(prompt, input_ids, getattr(self.params, "chat_template", True))
        eos = eos_of(self.tokenizer(), *self._models_for_tokenizer())
        outs, stats = [], []
        for ids in rows:
            new, st = self.generate_row(ids, torch.Generator().manual_seed(seed), eos)
            outs.append(new)
            stats.append(st)
        return GenerationOutput(outs, self.decode(outs), stats)

    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        """New token ids for one prompt, and its counters."""
        raise NotImplementedError

    def tokenizer(self):
        if not hasattr(self, "_tok"):
            try:
                self._tok = find_tokenizer(*self._models_for_tokenizer())
            except (ValueError, OSError):
                self._tok = None
        return self._tok

    def prompts_to_ids(self, prompt: Any = None, input_ids: Any = None, chat_template: bool = True) -> list[list[int]]:
        if input_ids is not None:
            rows = input_ids.tolist() if isinstance(input_ids, torch.Tensor) else input_ids
            if rows and isinstance(rows[0], int):
                rows = [rows]
            return [list(map(int, r)) for r in rows]
        if prompt is None:
            raise ValueError("give prompt= (str or list of str) or input_ids=")
        tok = self.tokenizer()
        if tok is None:
            raise ValueError("no tokenizer available; pass input_ids=")
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        return [encode_prompt(tok, p, chat_template) for p in prompts]

    def decode(self, rows: list[list[int]]) -> list[str] | None:
        tok = self.tokenizer()
        if tok is None:
            return None
        return [tok.decode(r, skip_special_tokens=True) for r in rows]

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"prompt": [self.default_prompts[i % len(self.default_prompts)] for i in range(batch_size)]}

    def input_rows(self, inputs):
        return prompt_rows(inputs.get("prompt"), inputs.get("input_ids"))

    def output_rows(self, outputs):
        return split_rows(outputs)

    def run_cli(self, inputs, seed: int) -> str:
        prompt = inputs.prompt if inputs is not None else self.default_prompts[0]
        out = self(seed=seed, prompt=prompt)
        text = out.texts[0] if out.texts else repr(out.token_ids[0])
        return f"{text}\n{summarize_stats(out.stats[0])}"


def summarize_stats(s: dict[str, Any]) -> str:
    parts = [f"new_tokens={s.get('new_tokens')}"]
    for k in ("dlm_forwards", "ar_forwards", "windows"):
        if k in s:
            parts.append(f"{k}={s[k]}")
    if s.get("windows"):
        parts.append(f"accepted/window={s['accepted_tokens'] / s['windows']:.2f}")
        parts.append(f"tokens/AR-forward={s['new_tokens'] / max(s['ar_forwards'], 1):.2f}")
    return " ".join(parts)


# ----------------------------------------------------------------------------- confidence decoding
def _confidence(probs: torch.Tensor, chosen: torch.Tensor, alg: str) -> torch.Tensor:
    if alg in ("low_confidence", "maskgit_plus"):
        return probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    if alg == "topk_margin":
        top2 = probs.topk(2, dim=-1).values
        return top2[..., 0] - top2[..., 1]
    if alg == "entropy":
        return (probs * probs.clamp_min(1e-30).log()).sum(-1)  # = -H, higher is more confident
    raise ValueError(f"unknown confidence rule {alg!r}; one of {ALGS}")


@torch.no_grad()
def confidence_decode(
    denoiser: MaskedDenoiser,
    prompt_ids: list[int],
    gen_length: int,
    tokens_per_step: int = 2,
    block_length: int | None = None,
    alg: str = "entropy",
    temperature: float = 0.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
    device: Any = "cpu",
    stop_at_eos: bool = True,
) -> tuple[list[int], dict[str, Any]]:
    """Standard DLM decoding of one prompt: ``gen_length`` masks after the prompt; semi-AR blocks of
    ``block_length`` (default: one block); in each step one denoiser forward, a proposal for every
    masked position of the block (argmax at ``temperature == 0``, else Gumbel-max on the tempered,
    top-p-truncated logits), and the ``tokens_per_step`` most confident proposals are committed.
    With ``stop_at_eos`` decoding ends early once an EOS is committed with no mask before it.
    Returns the new tokens (cut after the first EOS) and ``{"dlm_forwards": ..., "new_tokens": ...}``.
    """
    from zoo.methods.poe_bridge.core import gumbel_max, top_p_filter

    P = len(prompt_ids)
    mask = denoiser.mask_token_id
    x = torch.tensor([list(prompt_ids) + [mask] * gen_length], dtype=torch.long, device=device)
    block = block_length or gen_length
    n_blocks = -(-gen_length // block)
    forwards = 0
    for b in range(n_blocks):
        lo, hi = P + b * block, min(P + (b + 1) * block, P + gen_length)
        while True:
            masked = (x[0, lo:hi] == mask).nonzero().squeeze(-1) + lo
            if masked.numel() == 0:
                break
            logits = denoiser(x)[0, masked].float()
            forwards += 1
            if mask < logits.shape[-1]:
                logits[..., mask] = float("-inf")  # never propose the mask token itself
            if temperature > 0:
                lg = top_p_filter(logits / temperature, top_p)
                chosen = gumbel_max(lg, generator)
                probs = torch.softmax(lg, -1)
            else:
                probs = torch.softmax(logits, -1)
                chosen = probs.argmax(-1)
            conf = _confidence(probs, chosen, alg)
            k = min(tokens_per_step, masked.numel())
            pick = conf.topk(k).indices
            x[0, masked[pick]] = chosen[pick]
            if stop_at_eos and eos_id is not None:
                gen = x[0, P:]
                eos_pos = (gen == eos_id).nonzero()
                if eos_pos.numel() and not bool((gen[: int(eos_pos[0])] == mask).any()):
                    break
        if stop_at_eos and eos_id is not None:
            gen = x[0, P:]
            eos_pos = (gen == eos_id).nonzero()
            if eos_pos.numel() and not bool((gen[: int(eos_pos[0])] == mask).any()):
                break
    new = x[0, P:].tolist()
    if eos_id is not None and eos_id in new:
        new = new[: new.index(eos_id) + 1]
    else:
        new = [t for t in new if t != mask] if mask in new else new
    return new, {"dlm_forwards": forwards, "new_tokens": len(new)}


class ConfidenceDecoding(TextSampler):
    """The standard masked-DLM decoding baseline (LLaDA low-confidence / Dream entropy & margin),
    ``tokens_per_step`` tokens per denoiser forward, optional semi-AR blocks. Model role: ``proposal``."""

    class Params(ProcedureParams):
        max_new_tokens: int | None = Field(None, ge=1, le=4096, description="None: the model's default, else 256")
        tokens_per_step: int = Field(2, ge=1, le=4096, description="tokens unmasked per denoiser forward (paper baseline: 2)")
        block_length: int | None = Field(None, ge=1, le=4096, description="semi-AR block length (None: one block)")
        alg: Literal["low_confidence", "maskgit_plus", "topk_margin", "entropy"] = "entropy"
        temperature: float = Field(0.0, ge=0, le=100)
        top_p: float = Field(1.0, gt=0, le=1)
        stop_at_eos: bool = True
        chat_template: bool = True
        mask_token_id: int | None = Field(None, ge=0, le=10_000_000)
        shift_logits: bool | None = None

        @model_validator(mode="after")
        def _block(self):
            if self.block_length is not None and self.max_new_tokens is not None and self.block_length > self.max_new_tokens:
                raise ValueError("block_length must be <= max_new_tokens")
            return self

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.denoiser = MaskedDenoiser.wrap(self.models["proposal"], params.mask_token_id, params.shift_logits)

    def _models_for_tokenizer(self) -> list[Any]:
        return [self.models["proposal"]]

    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        p = self.params
        n_max = resolve_max_new_tokens(p.max_new_tokens, self.models["proposal"])
        return confidence_decode(self.denoiser, prompt_ids, n_max, p.tokens_per_step, p.block_length,
                                 p.alg, p.temperature, p.top_p, eos, g, self.device, p.stop_at_eos)
