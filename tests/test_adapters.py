"""Issue #9 item 5: PEFT adapters on hub sources — a random LoRA saved locally with peft is loaded
through the same builder call a hub adapter takes; sha256 verified; bad inputs are one line."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

import zoo
from registry.conformance import _tiny_checkpoint
from registry.errors import BuildError
from registry.spec import HubSource

from engine_ext_helpers import LIN, run_all, spec_dict, write_spec

peft = pytest.importorskip("peft", reason="peft is pinned in requirements-ci.txt")

TINY = {"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")


@pytest.fixture(scope="module")
def base_and_lora(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, torch.Tensor]]:
    """A tiny qwen2 folder and, inside the spec folder, a random (non-zero) LoRA saved with peft."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("adapters")
    tiny = _tiny_checkpoint(HubSource(source="transformers", model_class="AutoModelForCausalLM", id="o/m",
                                      allow_unpinned=True, tiny={"config": TINY}), root / "spec" / "base")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny.id)
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(str(root / "spec" / "lora"))
    from safetensors.torch import load_file

    return Path(tiny.id), root / "spec", load_file(str(root / "spec" / "lora" / "adapter_model.safetensors"))


def adapter_spec(base: Path, **adapter: object) -> dict:
    src = {"source": "transformers", "model_class": "AutoModelForCausalLM", "id": str(base),
           "adapters": [{"path": "lora", "adapter_name": "style", **adapter}]}
    return spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "lm": {"kind": "causal-lm", "variants": {"toy": src}}})


def test_lora_loads_through_the_builder(base_and_lora) -> None:
    base, folder, saved = base_and_lora
    sha = hashlib.sha256((folder / "lora" / "adapter_model.safetensors").read_bytes()).hexdigest()
    pipe = zoo.load(str(write_spec(folder, adapter_spec(base, sha256=sha))))
    lm = pipe.models["lm"]
    state = {k: v for k, v in lm.state_dict().items() if "lora_" in k}
    assert state and all(".style." in k for k in state)
    for k, v in saved.items():  # every saved LoRA tensor is in the model, unchanged
        match = [s for name, s in state.items() if name.replace(".style", "").endswith(k.split("base_model.model.", 1)[-1])]
        assert match and torch.equal(match[0], v), k
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(str(base))
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert not torch.allclose(lm(ids).logits, plain(ids).logits)  # the adapter is active


def test_adapter_sha256_mismatch_is_one_line(base_and_lora) -> None:
    base, folder, _ = base_and_lora
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(folder, adapter_spec(base, sha256="0" * 64), name="bad.yaml")))
    assert "sha256 mismatch for adapter style" in str(exc.value) and "adapters.0" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_adapter_schema() -> None:
    from pydantic import ValidationError

    from registry.spec import Adapter

    with pytest.raises(ValidationError, match="exactly one of hub or path"):
        Adapter(sha256="0" * 64)
    with pytest.raises(ValidationError, match="needs a pinned 40-hex revision"):
        Adapter(hub="o/lora", sha256="0" * 64)
    with pytest.raises(ValidationError, match=".safetensors file name only"):
        Adapter(path="x", weight_name="adapter_model.bin", sha256="0" * 64)


def test_conformance_loading_path_with_a_hub_adapter(tmp_path: Path) -> None:
    """The harness writes a tiny model plus a random LoRA for the declared hub adapter and loads both
    through the builder, offline."""
    src = {"source": "transformers", "model_class": "AutoModelForCausalLM", "id": "someorg/base", "revision": "e" * 40,
           "tiny": {"config": TINY},
           "adapters": [{"hub": "someorg/lora", "revision": "f" * 40, "sha256": "0" * 64, "adapter_name": "style"}]}
    data = spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "lm": {"kind": "causal-lm", "variants": {"full": src}}},
                     variants=["full", "toy"], hardware={"full": {"accelerator": "cuda"}, "toy": {"accelerator": "cpu"}})
    assert run_all(write_spec(tmp_path, data), only="loading-path") == {"ext-demo::loading-path[lm.full]": ("PASS", "")}
