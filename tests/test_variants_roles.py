"""Variant status, roles on a subset of variants, offline variant choice."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

import zoo
from registry.build import VariantStatusError, ZooWarning
from registry.context import build_pipeline
from registry.errors import BuildError, HardwareError, SpecError
from registry.spec import Spec
from zoo.cli import main

from engine_ext_helpers import LIN, entry, run_all, spec_dict, write_spec

HUB = {"source": "transformers", "model_class": "AutoModelForCausalLM", "id": "someorg/tiny-model", "revision": "b" * 40,
       "tiny": {"config": {"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                           "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}}}


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")


def status_spec() -> dict:
    return spec_dict(
        models={"model": {"kind": "linear", "variants": {"full": LIN, "paper": LIN, "toy": LIN}}},
        recipes={"train": {"target": "zoo_ext_plugin:TrainCopy"}},
        variants=["full", "paper", "toy"],
        hardware={"full": {"accelerator": "cpu", "status": "needs-training", "recipe": "train",
                           "reason": "the paper released no checkpoint for the trained part"},
                  "paper": {"accelerator": "cpu", "status": "declared-only", "reason": "gated model, dataset not available offline"},
                  "toy": {"accelerator": "cpu"}},
        metrics=[{"name": "fid", "dataset": "imagenet", "variant": "paper", "kind": "reported", "value": 2.1, "source": "Table 1"},
                 {"name": "w", "dataset": "none", "variant": "full", "kind": "reproduced", "value": 0.0, "tolerance": 0.1,
                  "command": "zoo check", "check": "zoo_ext_plugin:weight_sum"}],
    )


# ----------------------------------------------------------------------------- 1. status
def test_status_needs_its_recipe_or_reason() -> None:
    data = status_spec()
    data["hardware"]["full"].pop("recipe")
    with pytest.raises(ValidationError, match="needs-training variant names the recipe"):
        Spec.model_validate(data)
    data = status_spec()
    data["hardware"]["full"]["recipe"] = "nope"
    with pytest.raises(ValidationError, match="'nope' is not a recipe"):
        Spec.model_validate(data)
    data = status_spec()
    data["hardware"]["paper"].pop("reason")
    with pytest.raises(ValidationError, match="declared-only variant says why"):
        Spec.model_validate(data)


def test_non_runnable_variants_are_refused_in_one_line(tmp_path: Path) -> None:
    path = write_spec(tmp_path, status_spec())
    with pytest.raises(VariantStatusError) as exc:
        zoo.load(str(path), variant="full")
    msg = str(exc.value)
    assert "needs-training" in msg and "'train'" in msg and "hardware.full.status" in msg and "\n" not in msg
    with pytest.raises(VariantStatusError, match="declared-only: gated model"):
        zoo.load(str(path), variant="paper")
    # the recipe that produces the missing weights may run on it
    pipe = zoo.load(str(path), variant="full", sampler="train")
    assert pipe.variant == "full" and pipe.default == "train"
    # the automatic choice passes over both and says so
    with pytest.warns(ZooWarning, match="skipped full is needs-training.*paper is declared-only"):
        pipe = zoo.load(str(path))
    assert pipe.variant == "toy" and len(pipe.skipped) == 2


def test_cli_refuses_a_non_runnable_variant_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec(tmp_path, status_spec())
    assert main(["run", str(path), "--variant", "paper"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "declared-only" in err[0] and "ext-demo.yaml:" in err[0]


def test_show_and_list_display_the_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from registry.catalog import Catalog

    monkeypatch.setattr(zoo, "_catalog", Catalog())  # --specs adds to the process-wide catalog: keep it private
    path = write_spec(tmp_path, status_spec())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "needs-training (recipe train)" in out and "declared-only: gated model" in out
    assert main(["--specs", str(tmp_path), "list"]) == 0
    out = capsys.readouterr().out
    assert "full (needs-training)" in out and "paper (declared-only)" in out


def test_conformance_skips_non_runnable_variants_never_passes(tmp_path: Path) -> None:
    results = run_all(write_spec(tmp_path, status_spec()))
    assert results["ext-demo::builds[full]"][0] == "SKIP" and "needs-training" in results["ext-demo::builds[full]"][1]
    assert results["ext-demo::builds[paper]"][0] == "SKIP" and "declared-only" in results["ext-demo::builds[paper]"][1]
    assert results["ext-demo::builds[toy]"][0] == "PASS"
    metric = results["ext-demo::metric[w@none/full]"]
    assert metric[0] == "SKIP" and "needs-training" in metric[1]
    # the procedures are checked on the runnable variant
    assert results["ext-demo::samplers[apply]::seeded-determinism"][0] == "PASS"


# ----------------------------------------------------------------------------- 2. roles on a subset of variants
def subset_spec(default: str = "apply", roles: list[str] | None = ["teacher"]) -> dict:
    data = spec_dict(
        models={"model": {"kind": "linear", "variants": {"train": LIN, "toy": LIN}},
                "teacher": {"kind": "linear", "description": "training-only", "variants": {"train": LIN}}},
        recipes={"distill": {"target": "zoo_ext_plugin:Distill", **({"roles": roles} if roles else {})}},
        default=default,
        variants=["toy", "train"],
        hardware={"toy": {"accelerator": "cpu"}, "train": {"accelerator": "cpu"}},
    )
    return data


def test_a_role_may_cover_only_some_variants(tmp_path: Path) -> None:
    path = write_spec(tmp_path, subset_spec())
    pipe = zoo.load(str(path))
    assert pipe.variant == "toy" and "teacher" not in pipe.models
    assert "distill" not in pipe.procedures and "teacher" in pipe.unavailable["distill"]
    full = zoo.load(str(path), variant="train", sampler="distill")
    assert full(seed=0).shape == (1, 2)


def test_procedure_needing_a_missing_role_fails_at_build_time(tmp_path: Path) -> None:
    path = write_spec(tmp_path, subset_spec())
    with pytest.raises(BuildError) as exc:
        zoo.load(str(path), sampler="distill")
    msg = str(exc.value)
    assert "procedure distill needs role 'teacher'" in msg and "variant toy" in msg and "\n" not in msg
    assert "recipes.distill.roles" in msg


def test_undeclared_role_use_fails_in_one_line_naming_role_variant_procedure(tmp_path: Path) -> None:
    path = write_spec(tmp_path, subset_spec(default="distill", roles=None))
    pipe = zoo.load(str(path))  # nothing declared, so it builds ...
    with pytest.raises(BuildError) as exc:  # ... and says exactly what is missing when used
        pipe(seed=0)
    assert str(exc.value) == "role 'teacher' has no source for variant toy (needed by procedure distill)"


def test_role_subset_schema_errors() -> None:
    data = subset_spec()
    data["models"]["teacher"]["variants"]["nope"] = LIN
    with pytest.raises(ValidationError, match="unknown variant"):
        Spec.model_validate(data)
    data = subset_spec(roles=["ghost"])
    with pytest.raises(ValidationError, match="unknown role 'ghost'"):
        Spec.model_validate(data)


def test_conformance_checks_a_procedure_on_a_variant_that_has_its_roles(tmp_path: Path) -> None:
    results = run_all(write_spec(tmp_path, subset_spec()), only="distill")
    assert results["ext-demo::recipes[distill]::seeded-determinism"][0] == "PASS"


def test_a_default_that_cannot_run_on_a_loadable_variant_is_a_one_line_spec_error(tmp_path: Path) -> None:
    """A loadable variant's default procedure must have its roles there: the spec names one for it in
    ``default_by_variant`` (a declared-only variant never loads, so it is exempt)."""
    data = subset_spec(default="distill")
    with pytest.raises(ValidationError) as exc:
        Spec.model_validate(data)
    assert ("default: 'distill' needs role 'teacher', which has no source for variant toy "
            "(name a procedure that runs there in default_by_variant.toy)") in str(exc.value)
    data["hardware"]["toy"] = {"accelerator": "cpu", "status": "declared-only", "reason": "not shipped"}
    Spec.model_validate(data)  # exempt
    data = subset_spec(default="distill")
    data["default_by_variant"] = {"toy": "distill"}
    with pytest.raises(ValidationError, match="default_by_variant.toy: 'distill' needs role 'teacher'"):
        Spec.model_validate(data)
    for bad, expected in (({"nope": "apply"}, "default_by_variant: unknown variant 'nope'"),
                          ({"toy": "ghost"}, "default_by_variant.toy: 'ghost' is not a sampler or recipe")):
        data["default_by_variant"] = bad
        with pytest.raises(ValidationError, match=expected):
            Spec.model_validate(data)


def test_default_by_variant_picks_the_procedure_a_pipeline_of_that_variant_calls(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = subset_spec(default="distill")
    data["default_by_variant"] = {"toy": "apply"}
    path = write_spec(tmp_path, data)
    toy = zoo.load(str(path), variant="toy")
    assert toy.default == "apply" and "distill" not in toy.procedures
    train = zoo.load(str(path), variant="train")
    assert train.default == "distill" and train(seed=0).shape == (1, 2)
    assert zoo.load(str(path), variant="toy", sampler="apply").default == "apply"  # the caller's choice wins
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "apply (default on toy)" in out and "distill (default on train)" in out


# ----------------------------------------------------------------------------- 10. offline variant choice
def offline_spec() -> dict:
    return spec_dict(
        models={"model": {"kind": "linear", "variants": {"toy": LIN}},
                "lm": {"kind": "causal-lm", "variants": {"full": HUB}}},
        variants=["full", "toy"],
        hardware={"full": {"accelerator": "any"}, "toy": {"accelerator": "cpu"}},
    )


def test_offline_choice_skips_variants_whose_hub_files_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    path = write_spec(tmp_path / "spec", offline_spec())
    with pytest.warns(ZooWarning, match="skipped full offline and not in the local cache: someorg/tiny-model@bbbbbbbbbbbb"):
        pipe = zoo.load(str(path))
    assert pipe.variant == "toy" and pipe.skipped
    # asking for it explicitly still tries, and fails in one line
    with pytest.raises(BuildError, match="offline"):
        zoo.load(str(path), variant="full")


def test_offline_choice_takes_a_cached_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the snapshot in the HF cache the first variant is chosen and loads offline."""
    from registry.conformance import _tiny_checkpoint
    from registry.spec import HubSource

    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    import huggingface_hub.file_download as fd

    monkeypatch.setattr(fd, "HF_HUB_CACHE", str(hub), raising=False)
    tiny = _tiny_checkpoint(HubSource.model_validate(HUB), tmp_path / "w")
    snap = hub / "models--someorg--tiny-model" / "snapshots" / ("b" * 40)
    snap.parent.mkdir(parents=True)
    Path(tiny.id).rename(snap)
    (hub / "models--someorg--tiny-model" / "refs").mkdir()
    path = write_spec(tmp_path / "spec", offline_spec())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZooWarning)
        pipe = zoo.load(str(path))
    assert pipe.variant == "full" and pipe.models["lm"].config.model_type == "qwen2"


def test_show_says_which_variants_are_not_available_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    path = write_spec(tmp_path / "spec", offline_spec())
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "offline and not in the local cache: someorg/tiny-model" in out


def test_no_variant_runs_lists_every_reason(tmp_path: Path) -> None:
    data = status_spec()
    data["variants"] = ["full", "paper"]
    data["hardware"].pop("toy")
    data["models"]["model"]["variants"].pop("toy")
    path = write_spec(tmp_path, data)
    with pytest.raises(HardwareError, match="no variant of ext-demo can run here: full is needs-training.*paper is declared-only"):
        build_pipeline(entry(path).spec, file=path)


def test_each_procedure_check_uses_its_own_procedure_not_the_last_one(tmp_path: Path) -> None:
    """Regression: the per-procedure conformance checks are closures made in a loop; a sampler whose roles no
    CPU variant has, listed before one that runs, must be SKIP (not checked with the later sampler's variant,
    which failed with KeyError before each check bound its own ``procedure``)."""
    data = spec_dict(
        models={"model": {"kind": "linear", "variants": {"toy": LIN, "gpu": LIN}},
                "teacher": {"kind": "linear", "variants": {"gpu": LIN}}},
        samplers={"needs-teacher": {"target": "zoo_ext_plugin:Apply", "roles": ["model", "teacher"]},
                  "apply": {"target": "zoo_ext_plugin:Apply", "roles": ["model"]}},
        variants=["toy", "gpu"],
        hardware={"toy": {"accelerator": "cpu"}, "gpu": {"accelerator": "cuda"}},
    )
    results = run_all(write_spec(tmp_path, data))
    first = results["ext-demo::samplers[needs-teacher]::seeded-determinism"]
    assert first[0] == "SKIP" and "no runnable CPU variant has the roles" in first[1], first
    assert results["ext-demo::samplers[needs-teacher]::param-validation"][0] == "SKIP"
    assert results["ext-demo::samplers[apply]::seeded-determinism"][0] == "PASS"
