"""Training recipes cannot corrupt other pipelines (mutates_models,
conformance's bit-identical check, produces), batch independence for any procedure,
tokenizers as roles."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo
from registry.contract import private_copies
from registry.conformance import _tiny_checkpoint
from registry.spec import HubSource

from engine_ext_helpers import LIN, run_all, spec_dict, write_spec


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")


def train_spec(target: str, produces: str | None = "model") -> dict:
    recipe = {"target": target, **({"produces": produces} if produces else {})}
    return spec_dict(recipes={"train": recipe})


# ----------------------------------------------------------------------------- 7. in-place training
def test_a_recipe_training_in_place_is_caught(tmp_path: Path) -> None:
    res = run_all(write_spec(tmp_path, train_spec("zoo_ext_plugin:Train", produces=None)), only="train")
    status, msg = res["ext-demo::recipes[train]::seeded-determinism"]
    assert status == "FAIL" and "changed the cached weights of role 'model'" in msg and "mutates_models" in msg


def test_in_place_training_really_leaks_into_later_pipelines(tmp_path: Path) -> None:
    """Negative control for the check above: without copies, a second pipeline sees trained weights."""
    path = write_spec(tmp_path, train_spec("zoo_ext_plugin:Train", produces=None))
    zoo.load(str(path), sampler="train")(seed=0)
    assert zoo.load(str(path)).models["model"].weight.abs().sum() > 0


def test_mutates_models_gets_private_copies(tmp_path: Path) -> None:
    path = write_spec(tmp_path, train_spec("zoo_ext_plugin:TrainCopy"))
    pipe = zoo.load(str(path), sampler="train")
    trained = pipe(seed=0)
    assert trained is not pipe.models["model"] and trained.weight.abs().sum() > 0
    assert pipe.models["model"].weight.abs().sum() == 0
    assert zoo.load(str(path)).models["model"].weight.abs().sum() == 0
    res = run_all(path, only="train")
    assert res["ext-demo::recipes[train]::seeded-determinism"][0] == "PASS"


def test_produces_reloads_into_the_role_factory_strictly(tmp_path: Path) -> None:
    res = run_all(write_spec(tmp_path / "a", train_spec("zoo_ext_plugin:TrainCopy")), only="produces")
    assert res == {"ext-demo::recipes[train]::produces[model]": ("PASS", "")}
    res = run_all(write_spec(tmp_path / "b", train_spec("zoo_ext_plugin:TrainWrongShape")), only="produces")
    status, msg = res["ext-demo::recipes[train]::produces[model]"]
    assert status == "FAIL" and "tensor weight has shape (3, 3), the model expects (2, 2)" in msg


def test_private_copies_helper() -> None:
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    copies = private_copies({"a": a, "b": b}, ["a"])
    assert copies["a"] is not a and torch.equal(copies["a"].weight, a.weight) and copies["b"] is b


# ----------------------------------------------------------------------------- 9. batch independence for any procedure
def test_batch_independence_is_checked_for_recipes(tmp_path: Path) -> None:
    data = spec_dict(recipes={"est": {"target": "zoo_ext_plugin:RowMean"}, "bad": {"target": "zoo_ext_plugin:BatchMean"}})
    res = run_all(write_spec(tmp_path, data), only="batch-independence")
    assert res["ext-demo::recipes[est]::batch-independence"] == ("PASS", "")
    status, msg = res["ext-demo::recipes[bad]::batch-independence"]
    assert status == "FAIL" and "row 0" in msg


# ----------------------------------------------------------------------------- 6. tokenizers as roles
TOK = {"source": "transformers", "model_class": "AutoTokenizer", "id": "someorg/tok", "revision": "d" * 40,
       "tiny": {"model_class": "PreTrainedTokenizerFast", "config": {"vocab": ["the", "zoo", "model"]}}}


def test_tokenizer_role_loads_from_a_local_folder(tmp_path: Path) -> None:
    tiny = _tiny_checkpoint(HubSource.model_validate(TOK), tmp_path / "s")  # a local folder inside the spec's
    data = spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "tokenizer": {"kind": "tokenizer", "variants": {"toy": {
                                 "source": "transformers", "model_class": "AutoTokenizer", "id": tiny.id,
                                 "dtype": "float32", "transform": "zoo_ext_plugin:tag"}}}},
                     recipes={"tok": {"target": "zoo_ext_plugin:Tokenize"}})
    pipe = zoo.load(str(write_spec(tmp_path / "s", data)), sampler="tok")
    tok = pipe.models["tokenizer"]
    from transformers import PreTrainedTokenizerFast

    assert isinstance(tok, PreTrainedTokenizerFast) and tok.zoo_tag == "tagged"
    assert pipe(text="the zoo model") == tok.convert_tokens_to_ids(["the", "zoo", "model"])
    assert tok.convert_ids_to_tokens(pipe(text="the unknown")) == ["the", "[UNK]"]


def test_tokenizer_loading_path_in_conformance(tmp_path: Path) -> None:
    data = spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "tokenizer": {"kind": "tokenizer", "variants": {"full": TOK}}},
                     variants=["full", "toy"], hardware={"full": {"accelerator": "cuda"}, "toy": {"accelerator": "cpu"}})
    res = run_all(write_spec(tmp_path, data), only="loading-path")
    assert res == {"ext-demo::loading-path[tokenizer.full]": ("PASS", "")}


def test_image_processor_loading_path_in_conformance(tmp_path: Path) -> None:
    """A processor role: the harness writes a tiny processor of the concrete class and loads it back
    through AutoImageProcessor, offline."""
    proc = {"source": "transformers", "model_class": "AutoImageProcessor", "id": "someorg/proc", "revision": "a" * 40,
            "tiny": {"model_class": "ViTImageProcessor", "config": {"size": {"height": 8, "width": 8}}}}
    data = spec_dict(models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                             "processor": {"kind": "image-processor", "variants": {"full": proc}}},
                     variants=["full", "toy"], hardware={"full": {"accelerator": "cuda"}, "toy": {"accelerator": "cpu"}})
    assert run_all(write_spec(tmp_path, data), only="loading-path") == {"ext-demo::loading-path[processor.full]": ("PASS", "")}
