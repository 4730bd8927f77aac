"""For AR samplers: ``pipe.native`` of ``ar-decoding`` is the target's own
transformers ``generate()`` with the sampler's cache and logits processors (temperature, then top-p,
then seeded Gumbel-max noise), giving the zoo call's tokens for the same seed; tested on a tiny local
Qwen2 saved with ``save_pretrained`` (random init: high-entropy next-token laws, so seeds and top-p
change the output) and on the shipped toy."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from registry.errors import RunError

TINY = dict(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, eos_token_id=2, bos_token_id=1, pad_token_id=0)

SPEC = """name: tiny-ar
title: AR decoding of a tiny local causal LM
task: text-generation
implementation: zoo.methods.poe_bridge
models:
  target:
    kind: causal-lm
    variants:
      local: {source: transformers, model_class: AutoModelForCausalLM, id: ./tiny-ar, dtype: float32}
samplers:
  greedy: {target: "zoo.methods.poe_bridge:ARDecoding", params: {temperature: 0.0, max_new_tokens: 12}}
  sampled: {target: "zoo.methods.poe_bridge:ARDecoding", params: {temperature: 0.7, top_p: 0.9, max_new_tokens: 12}}
default: greedy
variants: [local]
hardware: {local: {accelerator: cpu}}
"""

PROMPTS = [[1, 5, 6, 7, 8], [1, 9, 10, 11, 12]]  # equal lengths: generate() runs them as one batch, unpadded
SEEDS = (0, 3, 5)  # seeds whose sampled rows run all 12 tokens (EOS, id 2 from the config: the folder has no tokenizer)


def _save_tiny(path: Path, **generation: Any) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**TINY)).eval()
    for key, value in generation.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(path)


def _build(d: Path) -> Any:
    import zoo
    from registry.context import build_pipeline
    from registry.loader import load_spec_file

    (d / "tiny-ar.yaml").write_text(SPEC)
    assert zoo  # the package's plugins are registered
    return build_pipeline(load_spec_file(d / "tiny-ar.yaml"), file=d / "tiny-ar.yaml", device="cpu")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("native-ar")
    _save_tiny(d / "tiny-ar")
    return _build(d)


def _new_tokens(native: Any, seed: int, prompts: list[list[int]] = PROMPTS) -> list[list[int]]:
    """``native(...)`` rows without the prompt, cut after the first EOS (finished rows are padded)."""
    rows = native(prompts, seed=seed)[:, len(prompts[0]):].tolist()
    eos = native.generation_config.eos_token_id
    return [r[: r.index(eos) + 1] if eos in r else r for r in rows]


def test_native_is_the_targets_generate_with_the_methods_cache_and_processors(pipe: Any) -> None:
    from transformers import Cache, GenerationConfig, LogitsProcessorList

    from zoo.methods.poe_bridge.native import ARGenerate, SeededGumbelLogitsProcessor, TemperatureTopPLogitsWarper

    native = pipe.native
    assert isinstance(native, ARGenerate) and native.model is pipe.models["target"]  # the built model, not a reload
    kw = native.generate_kwargs(seed=0)
    assert isinstance(kw["generation_config"], GenerationConfig) and kw["generation_config"].do_sample is False
    assert [v for v in kw.values() if isinstance(v, Cache)]  # a fresh transformers Cache per call
    assert kw["logits_processor"] == LogitsProcessorList()  # greedy: nothing to process
    sampled = pipe.procedures["sampled"].native()
    procs = sampled.logits_processor(seed=0, batch_size=2)
    assert [type(p) for p in procs] == [TemperatureTopPLogitsWarper, SeededGumbelLogitsProcessor]
    assert (procs[0].temperature, procs[0].top_p) == (0.7, 0.9) and len(procs[1].generators) == 2
    from zoo.common.masked_dlm import eos_of

    proc = pipe.procedures["sampled"]
    assert sampled.generation_config.max_new_tokens == 12
    assert sampled.generation_config.eos_token_id == eos_of(proc.tokenizer(), proc.target)  # the id the zoo stops on


@pytest.mark.parametrize("sampler", ["greedy", "sampled"])
def test_native_generate_gives_the_zoo_tokens_for_the_same_seed(pipe: Any, sampler: str) -> None:
    """Invariant: for each seed, ``native(ids, seed=s)`` (a batch of equal-length rows, one seeded
    generator per row) and the spelled-out ``model.generate(ids, **native.generate_kwargs(seed=s))``
    return the zoo call's new tokens, row by row."""
    proc = pipe.procedures[sampler]
    native = proc.native()
    outs = {}
    for seed in SEEDS:
        ours = proc(input_ids=PROMPTS, seed=seed).token_ids
        assert all(len(r) == 12 for r in ours)  # no early EOS: every compared row is a full 12-token decode
        assert _new_tokens(native, seed) == ours, (sampler, seed)
        spelled = native.model.generate(torch.tensor(PROMPTS[:1]), attention_mask=torch.ones(1, 5, dtype=torch.long),
                                        **native.generate_kwargs(seed=seed))
        assert spelled[0, 5:].tolist()[: len(ours[0])] == ours[0]
        outs[seed] = ours
    first, *others = outs.values()
    if sampler == "greedy":
        assert all(o == first for o in others)
    else:  # negative control: the seed matters, so the equality above is not trivially greedy
        assert all(o != first for o in others) and others[0] != others[1]


def test_native_follows_top_p_and_a_different_top_p_changes_the_tokens(pipe: Any) -> None:
    """Negative control: the native object follows the sampler's top-p (per-call override included);
    a narrower nucleus gives other tokens for the same seed, in both the zoo call and ``generate()``."""
    proc = pipe.procedures["sampled"]
    narrow = proc.with_params(top_p=0.3)
    wide = _new_tokens(proc.native(), 1)
    assert _new_tokens(narrow.native(), 1) == narrow(input_ids=PROMPTS, seed=1).token_ids
    assert _new_tokens(narrow.native(), 1) != wide


def test_native_uses_the_samplers_cache_factory(pipe: Any) -> None:
    """The method's cache: the sampler's ``cache_factory`` (here a counting ``DynamicCache``) is the cache
    ``generate()`` fills, one fresh cache per call; the tokens stay the zoo's."""
    from transformers import DynamicCache

    from zoo.methods.poe_bridge import ARDecoding

    made: list[Any] = []

    class CountingCache(DynamicCache):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    proc = pipe.procedures["sampled"]
    custom = ARDecoding(models={"target": pipe.models["target"]}, params=proc.params, cache_factory=CountingCache)
    ours = custom(input_ids=PROMPTS[:1], seed=3).token_ids[0]
    n_zoo = len(made)
    native = custom.native()
    assert _new_tokens(native, 3, PROMPTS[:1])[0] == ours
    assert len(made) == n_zoo + 1
    assert made[-1].get_seq_length() == len(PROMPTS[0]) + len(ours) - 1  # the last token is never fed back


def test_checkpoint_generation_defaults_are_neutralised_or_refused(tmp_path: Path) -> None:
    """A checkpoint whose generation_config samples with a repetition penalty (as Qwen2.5-Instruct's does):
    plain ``generate()`` picks that up and decodes otherwise, ``pipe.native`` still gives the zoo's tokens;
    one that sets an option generate() cannot switch off again is refused in one line."""
    _save_tiny(tmp_path / "tiny-ar", do_sample=True, temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=3.0)
    pipe = _build(tmp_path)
    ours = pipe(input_ids=PROMPTS, seed=0).token_ids
    assert _new_tokens(pipe.native, 0) == ours
    gc = pipe.native.generation_config
    plain = pipe.models["target"].generate(torch.tensor(PROMPTS), attention_mask=torch.ones(2, 5, dtype=torch.long),
                                           max_new_tokens=12, do_sample=False, eos_token_id=gc.eos_token_id,
                                           pad_token_id=gc.pad_token_id)  # greedy, same EOS: only the penalty differs
    assert not torch.equal(plain, pipe.native(PROMPTS, seed=0))  # the control: the checkpoint's penalty is active

    pipe.models["target"].generation_config.suppress_tokens = [3]
    with pytest.raises(RunError, match="generation_config sets suppress_tokens") as exc:
        pipe.native
    assert "\n" not in str(exc.value)


def test_shipped_toy_native_generate_answers_as_the_zoo_does() -> None:
    """The shipped toy (a trained Qwen2ForCausalLM): greedy ``generate()`` gives the zoo's answer tokens."""
    import zoo

    pipe = zoo.load("ar-decoding", variant="toy", device="cpu")
    ids = pipe.procedure.prompts_to_ids(["347+285="])
    out = pipe(input_ids=ids, seed=0)
    assert out.texts[0].split(">")[-1] == "0632"
    assert pipe.native(ids, seed=0)[0, len(ids[0]):].tolist() == out.token_ids[0]


def test_no_native_generate_is_one_line(pipe: Any) -> None:
    """PoE-Bridge (a DLM drafts) has none and says where the AR target's is; a procedure that does not
    override the contract hook has none either; both reach the user as one line."""
    from zoo.methods.poe_bridge import PoEBridgeSampler

    with pytest.raises(ValueError, match="PoE-Bridge has no native transformers generate"):
        PoEBridgeSampler.native(object.__new__(PoEBridgeSampler))
    import zoo

    dlm = zoo.load("dlm-confidence-decoding", variant="toy", device="cpu")
    with pytest.raises(RunError, match="has no native library object") as exc:
        dlm.native
    assert "\n" not in str(exc.value)
