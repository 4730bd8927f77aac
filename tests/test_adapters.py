"""PEFT adapters on hub sources — a random LoRA saved locally with peft is loaded
through the same builder call a hub adapter takes; sha256 verified; bad inputs are one line."""
from __future__ import annotations

import hashlib
import json
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


# ----------------------------------------------------------------------------- diffusers sources
SD3 = {"sample_size": 8, "patch_size": 2, "in_channels": 4, "out_channels": 4, "num_layers": 1, "attention_head_dim": 8,
       "num_attention_heads": 2, "joint_attention_dim": 16, "caption_projection_dim": 16, "pooled_projection_dim": 16,
       "pos_embed_max_size": 8}
ALPHA, RANK = 6, 2  # lora_alpha != r: a loader that drops the config and infers alpha = r rescales the delta


def sd3_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {"hidden_states": torch.randn(1, 4, 8, 8, generator=g), "encoder_hidden_states": torch.randn(1, 3, 16, generator=g),
            "pooled_projections": torch.randn(1, 16, generator=g), "timestep": torch.tensor([3])}


@pytest.fixture(scope="module")
def sd3_and_lora(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spec folder with a tiny SD3 transformer (``base``), a random LoRA saved by peft's ``save_pretrained``
    (``lora``: prefixed keys, config in adapter_config.json) and the same LoRA saved by diffusers'
    ``save_lora_adapter`` (``dlora``: bare keys, config in the safetensors header)."""
    import copy

    from diffusers import SD3Transformer2DModel

    folder = tmp_path_factory.mktemp("diffusers-adapters") / "spec"
    torch.manual_seed(0)
    base = SD3Transformer2DModel(**SD3)
    base.save_pretrained(str(folder / "base"))
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=["to_q", "to_v"], init_lora_weights=False)
    peft.get_peft_model(copy.deepcopy(base), config).save_pretrained(str(folder / "lora"))
    again = SD3Transformer2DModel.from_pretrained(str(folder / "base"))
    from safetensors.torch import load_file

    bare = {k.removeprefix("base_model.model."): v for k, v in load_file(str(folder / "lora" / "adapter_model.safetensors")).items()}
    again.load_lora_adapter(bare, prefix=None, adapter_name="x",
                            metadata=json.loads((folder / "lora" / "adapter_config.json").read_text()))
    again.save_lora_adapter(str(folder / "dlora"), adapter_name="x")
    return folder


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def diffusers_spec(model_class: str = "SD3Transformer2DModel", base: str = "./base", **adapter: object) -> dict:
    src = {"source": "diffusers", "model_class": model_class, "id": base, "dtype": "float32",
           "adapters": [{"path": "lora", "adapter_name": "style", **adapter}]}
    return spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "net": {"kind": "dit", "variants": {"toy": src}}})


def test_diffusers_lora_is_active_and_equals_the_hand_computed_delta(sd3_and_lora: Path) -> None:
    """On one LoRA layer the built model computes W x + (alpha / r) B A x with A, B read from the saved file
    (Hu et al. 2021, https://arxiv.org/abs/2106.09685, eq. 3); the whole model equals peft's own PeftModel."""
    from diffusers import SD3Transformer2DModel
    from safetensors.torch import load_file

    folder = sd3_and_lora
    spec = diffusers_spec(sha256=sha(folder / "lora" / "adapter_model.safetensors"))
    net = zoo.load(str(write_spec(folder, spec))).models["net"]
    plain = SD3Transformer2DModel.from_pretrained(str(folder / "base"))
    saved = load_file(str(folder / "lora" / "adapter_model.safetensors"))
    name = "transformer_blocks.0.attn.to_q"
    a, b = saved[f"base_model.model.{name}.lora_A.weight"], saved[f"base_model.model.{name}.lora_B.weight"]
    x = torch.randn(5, a.shape[1], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        by_hand = plain.get_submodule(name)(x) + (ALPHA / RANK) * (x @ a.T @ b.T)
        assert (by_hand - plain.get_submodule(name)(x)).abs().max() > 1e-3  # the delta is not negligible
        torch.testing.assert_close(net.get_submodule(name)(x), by_hand)
        out, ref = net(**sd3_inputs()).sample, plain(**sd3_inputs()).sample
        assert (out - ref).abs().max() > 1e-3  # the adapter is active on the whole model
        reference = peft.PeftModel.from_pretrained(SD3Transformer2DModel.from_pretrained(str(folder / "base")), str(folder / "lora"))
        torch.testing.assert_close(out, reference(**sd3_inputs()).sample)
    assert list(net.peft_config) == ["style"] and net.peft_config["style"].lora_alpha == ALPHA


def test_diffusers_own_lora_layout_loads_the_same(sd3_and_lora: Path) -> None:
    """A LoRA saved by diffusers' ``save_lora_adapter`` (bare keys, config in the header) gives the same model."""
    folder = sd3_and_lora
    weights = {"weight_name": "pytorch_lora_weights.safetensors"}
    own = zoo.load(str(write_spec(folder, diffusers_spec(path="dlora", sha256=sha(folder / "dlora" / weights["weight_name"]),
                                                         **weights), name="own.yaml"))).models["net"]
    peft_saved = zoo.load(str(write_spec(folder, diffusers_spec(sha256=sha(folder / "lora" / "adapter_model.safetensors")),
                                         name="peft.yaml"))).models["net"]
    with torch.no_grad():
        torch.testing.assert_close(own(**sd3_inputs()).sample, peft_saved(**sd3_inputs()).sample, rtol=0, atol=0)


def test_diffusers_adapter_sha256_mismatch_is_one_line(sd3_and_lora: Path) -> None:
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(sd3_and_lora, diffusers_spec(sha256="0" * 64), name="bad-sha.yaml")))
    assert "sha256 mismatch for adapter style" in str(exc.value) and "adapters.0" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_adapter_for_another_architecture_is_one_line(sd3_and_lora: Path, base_and_lora) -> None:
    """A qwen2 LoRA on the SD3 transformer: its modules are not in the model."""
    _, qwen_folder, _ = base_and_lora
    folder = sd3_and_lora
    import shutil

    shutil.copytree(qwen_folder / "lora", folder / "qwen-lora", dirs_exist_ok=True)
    spec = diffusers_spec(path="qwen-lora", sha256=sha(folder / "qwen-lora" / "adapter_model.safetensors"))
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(folder, spec, name="wrong-arch.yaml")))
    assert "adapter style does not load" in str(exc.value) and "not found in the base model" in str(exc.value)
    assert "adapters.0" in str(exc.value) and "\n" not in str(exc.value)


def test_diffusers_class_without_lora_loading_is_one_line(tmp_path: Path) -> None:
    """UNet2DModel has no PeftAdapterMixin in diffusers: a clear error, not an AttributeError."""
    from diffusers import UNet2DModel

    UNet2DModel(sample_size=8, in_channels=1, out_channels=1, block_out_channels=(8,), norm_num_groups=4, layers_per_block=1,
                down_block_types=("DownBlock2D",), up_block_types=("UpBlock2D",)).save_pretrained(str(tmp_path / "base"))
    (tmp_path / "lora").mkdir()
    from safetensors.torch import save_file

    save_file({"x.lora_A.weight": torch.zeros(1, 1)}, str(tmp_path / "lora" / "adapter_model.safetensors"))
    spec = diffusers_spec("UNet2DModel", sha256=sha(tmp_path / "lora" / "adapter_model.safetensors"))
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(tmp_path, spec)))
    assert "UNet2DModel takes no adapters" in str(exc.value) and "adapters.0" in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("library, model_class, tiny", [("transformers", "AutoModelForCausalLM", TINY),
                                                       ("diffusers", "SD3Transformer2DModel", SD3)])
def test_conformance_loading_path_with_a_hub_adapter(tmp_path: Path, library: str, model_class: str, tiny: dict) -> None:
    """The harness writes a tiny model plus a random LoRA for the declared hub adapter (peft's default
    targets for a transformers model type, every linear layer of a diffusers model) and loads both
    through the builder, offline."""
    src = {"source": library, "model_class": model_class, "id": "someorg/base", "revision": "e" * 40,
           "tiny": {"config": tiny},
           "adapters": [{"hub": "someorg/lora", "revision": "f" * 40, "sha256": "0" * 64, "adapter_name": "style"}]}
    data = spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "net": {"kind": "net", "variants": {"full": src}}},
                     variants=["full", "toy"], hardware={"full": {"accelerator": "cuda"}, "toy": {"accelerator": "cpu"}})
    assert run_all(write_spec(tmp_path, data), only="loading-path") == {"ext-demo::loading-path[net.full]": ("PASS", "")}
