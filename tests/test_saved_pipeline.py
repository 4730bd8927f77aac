"""``Pipeline.save_pretrained(dir)`` / ``zoo.load(dir)`` give back the same pipeline (same
samples for the same seed) for factory-built, derived (``source: role`` + transform) and hub-class roles;
``Pipeline.to(device, dtype)``; a trained recipe's output saved and loaded as a variant; a saved folder is
checked as untrusted input; ``pipe.native.save_pretrained`` writes what ``DiffusionPipeline.from_pretrained``
loads."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

import zoo
from registry.conformance import assert_same
from registry.errors import BuildError, HardwareError, ParamError, SpecError
from registry.saved import MANIFEST, SPEC_FILE, verify_folder

from test_native_pipeline import SPEC as NATIVE_SPEC
from test_native_pipeline import TINY as TINY_UNET

#: the native-pipeline test's spec (a tiny local diffusers UNet: a hub-class role), declaring float64 too
HUB_SPEC = NATIVE_SPEC.replace("hardware: {local: {accelerator: cpu}}", "hardware: {local: {accelerator: cpu, dtypes: [float32, float64]}}")
assert HUB_SPEC != NATIVE_SPEC
#: robuq with its full-precision DiT and one derived role (a PTQ copy made by a registered transform)
DERIVED_ROLES_KEPT = {"dit", "dit-w158a4"}


def _hub_spec(tmp: Path) -> Path:
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    UNet2DModel(**TINY_UNET).save_pretrained(tmp / "tiny-unet")
    (tmp / "tiny-fdpm.yaml").write_text(HUB_SPEC)
    return tmp / "tiny-fdpm.yaml"


def _derived_spec(tmp: Path) -> Path:
    """``extends: robuq`` keeping the DiT and one quantised copy of it (``source: role`` + transform)."""
    robuq = zoo.spec("robuq")
    child: dict[str, Any] = {"extends": "robuq", "name": "robuq-one-copy", "variants": ["toy"], "hardware": {"full": None, "full-robuq": None},
                             "models": {r: {"variants": {v: None for v in m.variants if v != "toy"}} if r in DERIVED_ROLES_KEPT else None
                                        for r, m in robuq.models.items()},
                             "samplers": {n: None for n in robuq.samplers if n != "w158a4"}, "recipes": None,
                             "default": "w158a4", "default_by_variant": None, "metrics": [], "invariants": [], "bench": None, "training": None}
    path = tmp / "robuq-one-copy.yaml"
    path.write_text(yaml.safe_dump(child, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("saved-specs")
    return {"f-dpmsolver": "f-dpmsolver", "poe-bridge": "poe-bridge", "derived": str(_derived_spec(tmp)),
            "hub-class": str(_hub_spec(tmp))}


def _call(pipe: Any, seed: int) -> Any:
    return pipe(seed=seed, **pipe.procedure.example_inputs(2))


@pytest.mark.parametrize("which", ["f-dpmsolver", "poe-bridge", "derived", "hub-class"])
def test_save_and_reload_gives_the_same_pipeline(which: str, specs: dict[str, str], tmp_path: Path) -> None:
    """Same roles bit for bit, same parameters, same samples for a seed; only data files on disk."""
    pipe = zoo.load(specs[which])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = pipe.save_pretrained(tmp_path / "saved")
    loaded = zoo.load(folder)
    assert (loaded.spec.name, loaded.variant, loaded.default, loaded.dtype) == (pipe.spec.name, pipe.variant, pipe.default, pipe.dtype)
    assert sorted(loaded.models) == sorted(pipe.models) and sorted(loaded.procedures) == sorted(pipe.procedures)
    for role, model in pipe.models.items():
        if hasattr(model, "state_dict"):
            want, got = model.state_dict(), loaded.models[role].state_dict()
            assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) and want[k].dtype == got[k].dtype for k in want), role
    for name, proc in pipe.procedures.items():
        assert loaded.procedures[name].params == proc.params, name
    assert_same(_call(pipe, 3), _call(loaded, 3))
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert MANIFEST in files and SPEC_FILE in files
    assert all(f.endswith((".yaml", ".json", ".safetensors")) for f in files), files
    manifest = json.loads((folder / MANIFEST).read_text())
    assert set(manifest["files"]) == files - {MANIFEST}
    if which == "derived":
        saved = yaml.safe_load((folder / SPEC_FILE).read_text())
        assert saved["models"]["dit-w158a4"]["variants"]["toy"]["source"] == "role"  # re-derived from the saved parent
    if which == "hub-class":
        assert (folder / "models" / "denoiser" / "diffusion_pytorch_model.safetensors").is_file()
        assert yaml.safe_load((folder / SPEC_FILE).read_text())["models"]["denoiser"]["variants"]["local"]["id"] == "./models/denoiser"


def test_caller_params_and_dtype_are_saved(tmp_path: Path) -> None:
    """The effective parameters (the caller's overrides included) and a ``.to(dtype)`` of factory-built roles
    survive the round trip (the float64 weights load into the float32 factory through the declared dtype)."""
    child = tmp_path / "poe-f64.yaml"
    child.write_text("extends: poe-bridge\nname: poe-f64\nhardware: {toy: {dtypes: [float32, float64]}}\n")
    pipe = zoo.load(str(child), n_lanes=2).to(torch.float64)
    assert pipe.dtype == "float64" and pipe.models["target"].dtype == torch.float64
    folder = pipe.save_pretrained(tmp_path / "f64")
    loaded = zoo.load(folder)
    assert loaded.dtype == "float64" and loaded.procedure.params.n_lanes == 2
    assert {p.dtype for m in loaded.models.values() for p in m.parameters()} == {torch.float64}
    assert_same(pipe(["12+34="], seed=1), loaded(["12+34="], seed=1))


def test_to_moves_a_private_copy_and_checks_dtype_and_device(specs: dict[str, str], tmp_path: Path) -> None:
    a = zoo.load(specs["hub-class"])
    b = zoo.load(specs["hub-class"])
    assert a.models["denoiser"] is b.models["denoiser"]  # the build cache shares roles
    before = a(seed=0, batch_size=2).samples
    assert b.to(dtype=torch.float64) is b
    assert b.models["denoiser"] is not a.models["denoiser"] and a.models["denoiser"].dtype == torch.float32
    assert b.models["denoiser"].dtype == torch.float64 and b(seed=0, batch_size=2).samples.dtype == torch.float64
    assert torch.equal(a(seed=0, batch_size=2).samples, before)  # the other pipeline is untouched
    loaded = zoo.load(b.save_pretrained(tmp_path / "unet64"))  # a hub-class role saved in float64 comes back so
    assert loaded.models["denoiser"].dtype == torch.float64
    assert torch.equal(loaded(seed=0, batch_size=2).samples, b(seed=0, batch_size=2).samples)
    with pytest.raises(HardwareError, match="dtype float16 not declared for variant local"):
        b.to(torch.float16)
    if not torch.cuda.is_available():
        with pytest.raises(HardwareError, match="cuda requested, but"):
            b.to("cuda")
    with pytest.raises(ParamError, match="unexpected argument"):
        b.to("cpu", "mps")


def test_trained_recipe_output_saves_and_loads_as_a_variant(tmp_path: Path) -> None:
    """RAMAC's `train` recipe output replaces the actor; the folder loads as variant `my-run` with those weights."""
    pipe = zoo.load("ramac", variant="toy")
    out = pipe.procedures["train"](seed=0, steps=4, eta_warmup=2, eta_ramp=1, batch_size=8, risk_batch=4, data_size=32, eval_n=16)
    folder = pipe.save_pretrained(tmp_path / "trained", variant="my-run", replace={"actor": out})
    loaded = zoo.load(folder)
    assert loaded.variant == "my-run"
    got = loaded.models["actor"].state_dict()
    assert all(torch.equal(got[k], v) for k, v in out.actor_state.items())
    shipped = pipe.models["actor"].state_dict()
    assert any(not torch.equal(got[k], shipped[k]) for k in shipped)  # the trained weights, not the shipped ones
    assert all(torch.equal(a, b) for a, b in zip(loaded.models["critic"].state_dict().values(), pipe.models["critic"].state_dict().values()))
    acts = loaded(seed=2, n=4).actions  # the default `act` sampler now runs the trained actor
    assert not torch.equal(acts, pipe(seed=2, n=4).actions)
    assert all(m.kind == "reported" for m in loaded.spec.metrics)  # the measured numbers were of other weights
    with pytest.raises(ParamError, match="not a role of this pipeline"):
        pipe.save_pretrained(tmp_path / "x", replace={"actr": out})


def test_verification_catches_a_folder_that_does_not_reload_as_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a writer that perturbs the weights it saves is caught by the round-trip check, and
    nothing is left behind."""
    import registry.weights as weights

    real = weights.save_state
    monkeypatch.setattr(weights, "save_state", lambda state, path: real({k: v + 1e-3 if v.is_floating_point() else v
                                                                          for k, v in state.items()}, path))
    pipe = zoo.load("poe-bridge")
    with pytest.raises(BuildError, match="does not reload as saved"):
        pipe.save_pretrained(tmp_path / "bad")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.load("poe-bridge").save_pretrained(tmp_path_factory.mktemp("tamper") / "poe")


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _relist(folder: Path) -> None:
    """Rewrite the manifest to list the folder as it is now (an attacker can do that too)."""
    from registry.weights import sha256_file

    man = json.loads((folder / MANIFEST).read_text())
    man["files"] = {p.relative_to(folder).as_posix(): sha256_file(p) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps(man))


@pytest.mark.parametrize("attack,needle", [
    ("flip-a-byte", "sha256 mismatch"),
    ("python-file", "data files only"),
    ("pickle", "data files only"),
    ("unlisted", "not listed in zoo-pipeline.json"),
    ("symlink", "regular files only"),
    ("auto-map", "auto_map names code"),
    ("weights-outside", "outside the spec's folder tree"),
    ("bad-manifest", "format"),
])
def test_a_saved_folder_is_untrusted_input(attack: str, needle: str, saved: Path, tmp_path: Path) -> None:
    folder = _copy(saved, tmp_path / "f")
    weights = next((folder / "weights").glob("*.safetensors"))
    if attack == "flip-a-byte":
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1
        weights.write_bytes(bytes(data))
    elif attack == "python-file":
        (folder / "weights" / "hook.py").write_text("import os\n")
        _relist(folder)
    elif attack == "pickle":
        torch.save({"x": torch.zeros(1)}, folder / "weights" / "extra.bin")
        _relist(folder)
    elif attack == "unlisted":
        (folder / "notes.txt").write_text("hi")
    elif attack == "symlink":
        weights.unlink()
        weights.symlink_to(next((saved / "weights").glob("*.safetensors")))
    elif attack == "auto-map":
        (folder / "weights" / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "evil.Model"}}))
        _relist(folder)
    elif attack == "weights-outside":
        spec = yaml.safe_load((folder / SPEC_FILE).read_text())
        spec["models"]["target"]["variants"]["toy"]["weights"] = "../elsewhere.safetensors"
        (folder / SPEC_FILE).write_text(yaml.safe_dump(spec))
        _relist(folder)
    elif attack == "bad-manifest":
        man = json.loads((folder / MANIFEST).read_text())
        man["format"] = 99
        (folder / MANIFEST).write_text(json.dumps(man))
    with pytest.raises(SpecError) as info:
        zoo.load(folder)
    assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert str(folder) in str(info.value)


def test_saved_folder_works_with_the_cli(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    assert main(["run", str(saved), "--prompt", "12+34="]) == 0
    assert "0046" in capsys.readouterr().out
    assert main(["show", str(saved), "--no-detect"]) == 0
    assert "saved pipeline" in capsys.readouterr().out
    assert verify_folder(saved).variant == "toy"


def test_native_pipeline_saves_as_a_diffusers_ddpm_pipeline(specs: dict[str, str], tmp_path: Path) -> None:
    """``pipe.native.save_pretrained(d)`` loads with ``DiffusionPipeline.from_pretrained(d)`` (it wrote
    ``SchedulerPipeline``, which diffusers cannot resolve), as a DDPMPipeline whose F-DPMSolver scheduler has
    ``first_eps="evaluate"`` so it runs in DDPMPipeline's loop; its images are the zoo sampler's with that setting."""
    from diffusers import DDPMPipeline, DiffusionPipeline

    from zoo.methods.f_dpmsolver import FDPMSolverScheduler

    pipe = zoo.load(specs["hub-class"])
    with pytest.warns(UserWarning, match="first_eps='evaluate'"):
        pipe.native.save_pretrained(tmp_path / "native")
    assert json.loads((tmp_path / "native" / "model_index.json").read_text())["_class_name"] == "DDPMPipeline"
    loaded = DiffusionPipeline.from_pretrained(tmp_path / "native")
    assert type(loaded) is DDPMPipeline and isinstance(loaded.scheduler, FDPMSolverScheduler)
    assert loaded.scheduler.config.first_eps == "evaluate"
    images = loaded(batch_size=2, generator=torch.Generator().manual_seed(5), num_inference_steps=6, output_type="np").images
    from diffusers.utils.torch_utils import randn_tensor

    x_T = randn_tensor((2, 3, 8, 8), generator=torch.Generator().manual_seed(5), dtype=torch.float32)
    proc = zoo.load(specs["hub-class"], first_eps="evaluate").procedure
    want = proc(noise=x_T).samples
    np.testing.assert_allclose(images, (want / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).numpy(), atol=1e-6)
    # the DDIM baseline's native pipeline (a diffusers scheduler) loads the same way
    pipe.procedures["ddim"].native().save_pretrained(tmp_path / "ddim")
    assert type(DiffusionPipeline.from_pretrained(tmp_path / "ddim")) is DDPMPipeline


def test_saving_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    pipe = zoo.load("poe-bridge")
    with pytest.raises(Exception, match="neither empty nor a saved pipeline"):
        pipe.save_pretrained(tmp_path)
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_a_bare_name_that_is_also_a_saved_folder_is_ambiguous(saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(saved, tmp_path / "poe-bridge")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(zoo.ZooError, match="both a spec name and a saved pipeline folder here; write ./poe-bridge"):
        zoo.load("poe-bridge")
    assert zoo.load("./poe-bridge").spec.name == "poe-bridge"
    assert zoo.load(tmp_path / "poe-bridge").variant == "toy"
