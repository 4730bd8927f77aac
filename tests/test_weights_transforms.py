"""Weights from one hub file or a torch checkpoint (weights_only), converters,
post-load transforms and derived (``from_role``) roles; all on tiny local models, no network."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from safetensors.torch import save_file

import zoo
from registry.errors import BuildError, ParamError, ResolveError
from registry.spec import Spec

from engine_ext_helpers import LIN, run_all, spec_dict, write_spec

W = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
B = torch.tensor([0.5, -0.5])
REV = "c" * 40


@pytest.fixture(autouse=True)
def _allow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", "zoo_demo_plugin,zoo_ext_plugin")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def with_source(source: dict, **more: object) -> dict:
    return spec_dict(models={"model": {"kind": "linear", "variants": {"toy": source}}}, **more)


def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: str, filename: str, write) -> Path:
    """Put ``filename`` of ``repo``@REV into a temp HF cache, as hf_hub_download would have."""
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    import huggingface_hub.constants as c
    import huggingface_hub.file_download as fd

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(fd, "HF_HUB_CACHE", str(hub), raising=False)
    snap = hub / ("models--" + repo.replace("/", "--")) / "snapshots" / REV
    (snap / filename).parent.mkdir(parents=True, exist_ok=True)
    write(snap / filename)
    return snap / filename


# ----------------------------------------------------------------------------- 3. hub files and torch checkpoints
def test_hub_file_with_converter_loads_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fake_hub(tmp_path, monkeypatch, "owner/repo", "ckpt/model.pt",
                 lambda p: torch.save({"model": {"net.w": W, "net.b": B}, "step": 7}, p))
    src = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "ckpt/model.pt", "sha256": sha(f)},
           "convert": "zoo_ext_plugin:from_upstream"}
    pipe = zoo.load(str(write_spec(tmp_path / "s", with_source(src))))
    assert torch.equal(pipe.models["model"].weight, W) and torch.equal(pipe.models["model"].bias, B)


def test_hub_file_missing_offline_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub(tmp_path, monkeypatch, "owner/other", "x.safetensors", lambda p: p.write_bytes(b""))
    src = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "model.safetensors", "sha256": "0" * 64}}
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(tmp_path / "s", with_source(src))), variant="toy")
    assert "owner/repo" in str(exc.value) and "offline" in str(exc.value) and "\n" not in str(exc.value)


def test_hub_file_sha256_is_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub(tmp_path, monkeypatch, "owner/repo", "model.safetensors", lambda p: save_file({"weight": W, "bias": B}, str(p)))
    src = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "model.safetensors", "sha256": "1" * 64}}
    with pytest.raises(BuildError, match="sha256 mismatch for model.safetensors"):
        zoo.load(str(write_spec(tmp_path / "s", with_source(src))))


def test_unpinned_hub_file_needs_allow_unpinned_and_then_loads_the_default_branch_unverified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub file without revision/sha256 is refused in one line unless ``allow_unpinned: true``; with it, the file
    of the default branch loads (no sha256 to verify), through the same read/convert/load code."""
    f = fake_hub(tmp_path, monkeypatch, "owner/repo", "model.safetensors", lambda p: save_file({"weight": W, "bias": B}, str(p)))
    refs = f.parents[2] / "refs"
    refs.mkdir()
    (refs / "main").write_text(REV)
    unpinned = {"hub": "owner/repo", "filename": "model.safetensors"}
    with pytest.raises(ValidationError) as exc:
        Spec.model_validate(with_source({**LIN, "weights": unpinned}))
    assert "revision/sha256: a hub file needs a pinned 40-hex revision and its sha256 (or allow_unpinned: true)" in str(exc.value)
    with pytest.raises(ValidationError, match="sha256: a hub file needs"):
        Spec.model_validate(with_source({**LIN, "weights": {**unpinned, "revision": REV}}))
    src = {**LIN, "weights": {**unpinned, "allow_unpinned": True}}
    pipe = zoo.load(str(write_spec(tmp_path / "s", with_source(src))))
    assert torch.equal(pipe.models["model"].weight, W) and torch.equal(pipe.models["model"].bias, B)
    (refs / "main").unlink()  # not cached at the default branch: one line naming the file, offline
    with pytest.raises(BuildError) as missing:
        zoo.load(str(write_spec(tmp_path / "t", with_source(src))), variant="toy")
    assert "owner/repo@(unpinned)" in str(missing.value) and "\n" not in str(missing.value)


class Evil:
    """Anything torch.load would need a pickle global for."""

    def __init__(self) -> None:
        self.w = W


def test_pt_needing_pickle_globals_is_refused_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fake_hub(tmp_path, monkeypatch, "owner/repo", "evil.pt", lambda p: torch.save({"weight": W, "bias": B, "extra": Evil()}, p))
    src = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "evil.pt", "sha256": sha(f)}}
    with pytest.raises(BuildError) as exc:
        zoo.load(str(write_spec(tmp_path / "s", with_source(src))))
    msg = str(exc.value)
    assert "evil.pt needs pickle globals" in msg and "refused" in msg and "\n" not in msg


def test_hub_pt_and_local_safetensors_load_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fake_hub(tmp_path, monkeypatch, "owner/repo", "m.pth", lambda p: torch.save({"weight": W, "bias": B}, p))
    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"weight": W, "bias": B}, str(folder / "m.safetensors"))
    for name, weights in (("hub", {"hub": "owner/repo", "revision": REV, "filename": "m.pth", "sha256": sha(f)}),
                          ("local", "m.safetensors")):
        src = {**LIN, "weights": weights, **({"sha256": sha(folder / "m.safetensors")} if name == "local" else {})}
        pipe = zoo.load(str(write_spec(folder, with_source(src), name=f"{name}.yaml")))
        assert torch.equal(pipe.models["model"].weight, W)


def test_local_torch_checkpoints_never_reach_torch_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local weights are safetensors only: the schema refuses a local .pt, and so does the reader (a source
    built in Python, bypassing the schema, included)."""
    from registry.build import build_model
    from registry.spec import ZooSource

    folder = tmp_path / "s"
    folder.mkdir()
    torch.save({"weight": W, "bias": B}, folder / "m.pt")
    with pytest.raises(ValidationError, match="only .safetensors"):
        Spec.model_validate(with_source({**LIN, "weights": "m.pt", "sha256": sha(folder / "m.pt")}))
    calls: list[object] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(a))
    src = ZooSource.model_construct(**{**ZooSource(**LIN).model_dump(), "weights": "m.pt", "sha256": sha(folder / "m.pt")})
    with pytest.raises(BuildError, match="local weights are safetensors only"):
        build_model(src, spec_dir=folder)
    assert calls == []


def test_nested_checkpoint_without_converter_says_to_declare_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fake_hub(tmp_path, monkeypatch, "owner/repo", "up.ckpt", lambda p: torch.save({"model": {"net.w": W, "net.b": B}, "step": 3}, p))
    src = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "up.ckpt", "sha256": sha(f)}}
    with pytest.raises(BuildError, match="not a flat state dict of tensors.*declare a convert"):
        zoo.load(str(write_spec(tmp_path / "s", with_source(src))))


def test_converter_outside_the_allowlist_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"weight": W, "bias": B}, str(folder / "m.safetensors"))
    src = {**LIN, "weights": "m.safetensors", "sha256": sha(folder / "m.safetensors"), "convert": "json:loads"}
    with pytest.raises(ResolveError, match="'json:loads' is not allowed"):
        zoo.load(str(write_spec(folder, with_source(src))))


def test_weights_schema_errors() -> None:
    with pytest.raises(ValidationError, match="expected a relative path ending in"):
        Spec.model_validate(with_source({**LIN, "weights": {"hub": "o/r", "revision": REV, "filename": "m.bin", "sha256": "0" * 64}}))
    with pytest.raises(ValidationError, match="revision"):
        Spec.model_validate(with_source({**LIN, "weights": {"hub": "o/r", "filename": "m.pt", "sha256": "0" * 64}}))
    with pytest.raises(ValidationError, match="convert: given without weights"):
        Spec.model_validate(with_source({**LIN, "convert": "zoo_ext_plugin:from_upstream"}))


def test_conformance_loading_path_of_a_hub_file_uses_the_inverse(tmp_path: Path) -> None:
    """The harness saves the factory's random state, mapped back by the converter's inverse, under
    the same file name, and loads it through the same code; no network, no real file needed."""
    good = {**LIN, "weights": {"hub": "owner/repo", "revision": REV, "filename": "sub/model.pt", "sha256": "0" * 64},
            "convert": "zoo_ext_plugin:from_upstream"}
    data = with_source(good, variants=["full", "toy"], hardware={"full": {"accelerator": "cuda"}, "toy": {"accelerator": "cpu"}})
    data["models"]["model"]["variants"] = {"full": good, "toy": LIN}
    res = run_all(write_spec(tmp_path / "a", data), only="loading-path")
    assert res == {"ext-demo::loading-path[model.full]": ("PASS", "")}
    data["models"]["model"]["variants"]["full"] = {**good, "convert": "zoo_ext_plugin:rename_no_inverse"}
    res = run_all(write_spec(tmp_path / "b", data), only="loading-path")
    status, msg = res["ext-demo::loading-path[model.full]"]
    assert status == "FAIL" and "has no .inverse" in msg


# ----------------------------------------------------------------------------- 4. transforms and derived roles
def derived_spec(transform: str = "zoo_ext_plugin:quantise", config: dict | None = None) -> dict:
    return spec_dict(models={
        "model": {"kind": "linear", "variants": {"toy": {**LIN, "transform": "zoo_ext_plugin:scale", "transform_config": {"factor": 3.0}}}},
        "low": {"kind": "linear", "variants": {"toy": {"source": "role", "from_role": "model", "transform": transform,
                                                       "transform_config": config or {"step": 0.5}}}},
    })


def test_transform_and_from_role(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"weight": W / 10, "bias": B / 10}, str(folder / "m.safetensors"))
    data = derived_spec()
    data["models"]["model"]["variants"]["toy"].update(weights="m.safetensors", sha256=sha(folder / "m.safetensors"))
    pipe = zoo.load(str(write_spec(folder, data)))
    fp, low = pipe.models["model"], pipe.models["low"]
    assert torch.allclose(fp.weight, 3 * W / 10)  # the transform ran after loading (in place, returned None)
    assert low is not fp and torch.equal(low.weight, torch.round(3 * W / 10 / 0.5) * 0.5)
    assert torch.allclose(fp.weight, 3 * W / 10), "the parent role must not change"


def test_transform_cycle_is_a_spec_error() -> None:
    data = derived_spec()
    data["models"]["model"]["variants"]["toy"] = {"source": "role", "from_role": "low"}
    with pytest.raises(ValidationError, match=r"from_role: cycle (model -> low -> model|low -> model -> low)"):
        Spec.model_validate(data)
    data["models"]["model"]["variants"]["toy"] = {"source": "role", "from_role": "model"}
    with pytest.raises(ValidationError, match="cycle model -> model"):
        Spec.model_validate(data)


def test_from_role_must_exist_in_the_variant() -> None:
    data = derived_spec()
    data["models"]["low"]["variants"]["toy"]["from_role"] = "ghost"
    with pytest.raises(ValidationError, match="role 'ghost' has no source for variant toy"):
        Spec.model_validate(data)


def test_transform_outside_allowlist_and_bad_config(tmp_path: Path) -> None:
    with pytest.raises(ResolveError, match="'os:system' is not allowed"):
        zoo.load(str(write_spec(tmp_path / "a", derived_spec("os:system", {}))))
    with pytest.raises(ParamError) as exc:  # validated by the transform's params model before the call
        zoo.load(str(write_spec(tmp_path / "b", derived_spec(config={"nope": 1}))))
    assert "models.low.variants.toy.transform_config.nope: unknown parameter; expected one of: step" in str(exc.value)
    with pytest.raises(ValidationError, match="transform_config: given without a transform"):
        Spec.model_validate(with_source({**LIN, "transform_config": {"a": 1}}))


def test_derived_roles_pass_conformance(tmp_path: Path) -> None:
    res = run_all(write_spec(tmp_path, derived_spec()))
    assert all(status != "FAIL" for status, _ in res.values()), res


def test_unregistered_converter_or_transform_is_refused_and_linted(tmp_path: Path) -> None:
    """Only callables registered for the kind resolve: a plain helper of an allowed package (here the
    converter's inverse, not itself registered as a converter) or a converter used as a transform."""
    from registry.lint import lint

    from engine_ext_helpers import entry

    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"weight": W, "bias": B}, str(folder / "m.safetensors"))
    src = {**LIN, "weights": "m.safetensors", "sha256": sha(folder / "m.safetensors"), "convert": "zoo_ext_plugin:to_upstream"}
    path = write_spec(folder, with_source(src))
    with pytest.raises(ResolveError, match="to_upstream"):
        zoo.load(str(path))
    problems = [str(p) for p in lint(entry(path).spec, path, resolve=True)]
    assert len(problems) == 1 and "models.model.variants.toy.convert" in problems[0]
    path = write_spec(tmp_path / "t", derived_spec("zoo_ext_plugin:from_upstream", {}))
    with pytest.raises(ResolveError, match="from_upstream"):
        zoo.load(str(path))
