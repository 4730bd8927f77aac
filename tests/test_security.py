"""Specs are untrusted data : a spec can never run code of its choosing,
grant its own consent, load pickles or unchecked weights, reach the network, or crash the engine.

The two code-execution attacks (gadget factories, consent in ``zoo check``) are run end to end
against a model folder whose remote code writes a marker file when imported: the marker must
never appear.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from registry.build import build_model
from registry.context import build_pipeline
from registry.errors import BuildError, ParamError, ResolveError, RunError, ZooError
from registry.loader import load_spec_file
from registry.resolve import allow_package, resolve
from registry.spec import HubSource, TimmSource, ZooSource

FIXTURES = Path(__file__).parent / "fixtures"
DEMO = FIXTURES / "specs" / "demo-gaussian.yaml"
DEMO_WEIGHTS = FIXTURES / "specs" / "demo-affine.safetensors"
TINY_QWEN = {"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
             "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]),
           "HF_MODULES_CACHE": str(tmp_path / "hf_modules"), "ZOO_CACHE_DIR": str(tmp_path / "cache")}
    env.update(extra)
    return env


def _zoo(args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def _evil_code(folder: Path, marker: Path) -> None:
    """``evil.py``: remote code that writes ``marker`` as soon as it is imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evil.py").write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("remote code ran")
        from transformers import Qwen2Config, Qwen2ForCausalLM
        class EvilConfig(Qwen2Config):
            model_type = "evil"
        class EvilModel(Qwen2ForCausalLM):
            config_class = EvilConfig
    """))


def _evil_model_folder(folder: Path, marker: Path) -> None:
    """A local model folder whose config's ``auto_map`` points at ``evil.py`` next to it."""
    _evil_code(folder, marker)
    cfg = {**TINY_QWEN, "model_type": "evil", "architectures": ["EvilModel"],
           "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}}
    (folder / "config.json").write_text(json.dumps(cfg))


def _write_demo_spec(folder: Path, name: str, toy_source: str) -> Path:
    """The demo spec with its toy model source replaced by ``toy_source`` (a YAML flow mapping)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo-affine.safetensors").write_bytes(DEMO_WEIGHTS.read_bytes())
    lines = []
    for line in DEMO.read_text().splitlines():
        if line.startswith("name:"):
            line = f"name: {name}"
        elif line.strip().startswith("toy: {source: zoo"):
            line = f"      toy: {toy_source}"
        lines.append(line)
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- 1. gadget callables
def test_gadget_factory_zoo_load_never_runs_remote_code(tmp_path: Path) -> None:
    """`factory: "zoo:load"` with `config: {trust_remote_code: true}` granted the spec its own consent
    and ran the model folder's remote code. Now: refused by `zoo validate` and by `zoo run`; no marker."""
    marker = tmp_path / "MARKER-gadget"
    _evil_model_folder(tmp_path / "evil_model", marker)
    inner = tmp_path / "inner.yaml"
    inner.write_text(DEMO.read_text().replace("name: demo-gaussian", "name: inner").replace(
        "id: Qwen/Qwen2.5-0.5B", f"id: {tmp_path / 'evil_model'}\n        trust_remote_code: true").replace(
        "accelerator: cuda, min_memory_gb: 40, dtypes: [bfloat16]", "accelerator: cpu, dtypes: [bfloat16, float32]"))
    (tmp_path / "demo-affine.safetensors").write_bytes(DEMO_WEIGHTS.read_bytes())
    outer = _write_demo_spec(tmp_path / "outer", "outer",
                             f'{{source: zoo, factory: "zoo:load", config: {{name: "{inner}", trust_remote_code: true}}}}')
    cli = _write_demo_spec(tmp_path / "cli", "cli-gadget",
                           f'{{source: zoo, factory: "zoo.cli:main", config: {{argv: [run, "{inner}", --trust-remote-code]}}}}')
    plain = _write_demo_spec(tmp_path / "plain", "plain-gadget", f'{{source: zoo, factory: "zoo:load", config: {{name: "{inner}"}}}}')
    env = _env(tmp_path, ZOO_ALLOWED_PACKAGES="zoo_demo_plugin", ZOO_ALLOW_OUTSIDE_SPEC_DIR="1")
    for spec in (outer, cli, plain):
        for args in (["run", str(spec), "--variant", "toy"], ["validate", str(spec)]):
            res = _zoo(args, env)
            assert not marker.exists(), f"remote code ran through `zoo {' '.join(args)}`"
            assert res.returncode == 2, (args, res.stdout, res.stderr)
            assert "Traceback" not in res.stderr, res.stderr
    res = _zoo(["validate", str(outer)], env)
    assert "outer.yaml:11:" in res.stderr and "toy.config.trust_remote_code: " in res.stderr, res.stderr
    res = _zoo(["validate", str(plain)], env)
    assert "'zoo:load' is not registered as a factory" in res.stderr, res.stderr
    assert not marker.exists()


@pytest.mark.parametrize("target", ["zoo:load", "zoo.cli:main", "zoo:spec", "zoo_demo_plugin:Affine"])
def test_unregistered_callables_of_allowed_packages_never_resolve(target: str) -> None:
    with pytest.raises(ResolveError, match="not registered as a factory"):
        resolve(target, kind="factory")


def test_objects_resolve_only_for_the_kind_they_were_registered_for() -> None:
    assert resolve("zoo_demo_plugin:build_affine", kind="factory").__name__ == "build_affine"
    assert resolve("zoo_demo_plugin:GaussianSampler", kind="procedure").__name__ == "GaussianSampler"
    assert resolve("zoo_demo_plugin:sample_mean_abs", kind="metric_check").__name__ == "sample_mean_abs"
    for target, kind in [("zoo_demo_plugin:build_affine", "procedure"), ("zoo_demo_plugin:GaussianSampler", "factory"),
                         ("zoo_demo_plugin:sample_mean_abs", "factory"), ("zoo_demo_plugin:build_affine", "metric_check"),
                         ("zoo_demo_plugin:build_affine", "converter")]:
        with pytest.raises(ResolveError, match="not registered"):
            resolve(target, kind=kind)
    from registry.contract import Procedure, is_registered

    assert not is_registered(Procedure, "procedure")  # only subclasses opt in


@pytest.mark.parametrize("field,value", [
    ("config", {"trust_remote_code": True}),
    ("config", {"kwargs": {"nested": {"trust_remote_code": True}}}),
    ("config", {"weights_only": False}),
    ("config", {"custom_pipeline": "x"}),
])
def test_consent_keys_never_reach_a_factory(field: str, value: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="cannot be set by a spec"):
        ZooSource(source="zoo", factory="zoo_demo_plugin:build_affine", **{field: value})


def test_consent_keys_in_procedure_params_are_located_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(DEMO.read_text().replace("params: {temperature: 1.0}", "params: {temperature: 1.0, trust_remote_code: true}"))
    with pytest.raises(ZooError) as exc:
        load_spec_file(path)
    assert f"{path}:20:" in str(exc.value) and "trust_remote_code" in str(exc.value) and "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- 2. consent in zoo check
def test_check_never_runs_code_from_tiny_config(tmp_path: Path) -> None:
    """`zoo check` passed the spec's own trust_remote_code as consent and wrote its `tiny.config`
    (with `auto_map` pointing at a local folder's code) into the checkpoint it loaded: the code ran
    and the check passed. Now the spec is refused (auto_map points at code) and no code runs."""
    marker = tmp_path / "MARKER-check"
    code_dir = tmp_path / "code"
    _evil_code(code_dir, marker)
    auto_map = {"AutoConfig": f"{code_dir}--evil.EvilConfig", "AutoModelForCausalLM": f"{code_dir}--evil.EvilModel"}
    tiny = json.dumps({"config": {**TINY_QWEN, "auto_map": auto_map}})
    spec = tmp_path / "s.yaml"
    (tmp_path / "demo-affine.safetensors").write_bytes(DEMO_WEIGHTS.read_bytes())
    text = DEMO.read_text().replace("name: demo-gaussian", "name: evil-check")
    text = text.replace("allow_unpinned: true", "allow_unpinned: true\n        trust_remote_code: true")
    text = "\n".join(f"        tiny: {tiny}" if line.strip().startswith("tiny:") else line for line in text.splitlines()) + "\n"
    spec.write_text(text)
    env = _env(tmp_path, ZOO_ALLOWED_PACKAGES="zoo_demo_plugin")
    res = _zoo(["check", str(spec), "--only", "loading-path"], env)
    assert not marker.exists(), "remote code from tiny.config ran during zoo check"
    assert res.returncode != 0, res.stdout
    res = _zoo(["validate", str(spec)], env)
    assert res.returncode == 2 and "tiny.config.auto_map: 'auto_map'" in res.stderr, res.stderr
    assert not marker.exists()


@pytest.mark.parametrize("key", ["auto_map", "tokenizer_class", "_class_name", "custom_pipelines", "trust_remote_code", "architectures"])
def test_tiny_config_refuses_keys_that_point_at_code(key: str) -> None:
    with pytest.raises(ValueError, match="points at code|cannot be set by a spec"):
        HubSource(source="transformers", model_class="AutoModel", id="org/m", allow_unpinned=True,
                  tiny={"config": {**TINY_QWEN, key: "x"}})


def test_remote_code_loading_path_is_skipped_without_the_caller_flag(tmp_path: Path) -> None:
    spec = tmp_path / "r.yaml"
    (tmp_path / "demo-affine.safetensors").write_bytes(DEMO_WEIGHTS.read_bytes())
    spec.write_text(DEMO.read_text().replace("name: demo-gaussian", "name: remote-demo").replace(
        "allow_unpinned: true", "allow_unpinned: true\n        trust_remote_code: true"))
    env = _env(tmp_path, ZOO_ALLOWED_PACKAGES="zoo_demo_plugin")
    res = _zoo(["check", str(spec), "--only", "loading-path"], env)
    assert res.returncode == 0, res.stdout
    assert "SKIP  remote-demo::loading-path[model.full]" in res.stdout and "--allow-remote-code-stub" in res.stdout
    res = _zoo(["check", str(spec), "--only", "loading-path", "--allow-remote-code-stub"], env)
    assert res.returncode == 0 and "PASS  remote-demo::loading-path[model.full]" in res.stdout, res.stdout


# ----------------------------------------------------------------------------- 3. package allowlist
@pytest.mark.parametrize("name", ["torch", "os", "subprocess", "builtins", "importlib", "pickle", "numpy", "joblib",
                                  "dill", "cloudpickle", "transformers", "diffusers", "timm", "registry"])
def test_stdlib_and_loader_libraries_can_never_be_allowed(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ResolveError, match="may not be allowed"):
        allow_package(name)
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", f"zoo_demo_plugin,{name}")
    with pytest.raises(ResolveError, match=f"ZOO_ALLOWED_PACKAGES: '{name}' may not be allowed"):
        resolve(f"{name}:load", kind="factory")


def test_allowing_torch_by_environment_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = _write_demo_spec(tmp_path, "torch-load", '{source: zoo, factory: "torch:load", config: {f: x.pt}}')
    res = _zoo(["validate", str(spec)], _env(tmp_path, ZOO_ALLOWED_PACKAGES="zoo_demo_plugin,torch"))
    assert res.returncode == 2 and "ZOO_ALLOWED_PACKAGES: 'torch' may not be allowed" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# ----------------------------------------------------------------------------- 4. timm
def _timm_weights(tmp_path: Path, **kwargs: Any) -> tuple[Path, str]:
    import timm
    from safetensors.torch import save_file

    from registry.build import sha256_file

    model = timm.create_model("test_efficientnet", pretrained=False, **kwargs)
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path, sha256_file(path)


@pytest.mark.parametrize("extra,match", [
    ({"weights": "w.safetensors"}, "sha256: local weights need their sha256"),
    ({"weights": "w.pth", "sha256": "0" * 64}, "only .safetensors"),
    ({"kwargs": {"checkpoint_path": "/tmp/x.pth"}}, "not allowed for timm"),
    ({"kwargs": {"pretrained_cfg_overlay": {"file": "/tmp/x.pth"}}}, "not allowed for timm"),
    ({"pretrained": True}, "allow_unpinned"),
])
def test_timm_source_refuses_unsafe_specs(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TimmSource(source="timm", model_name="test_efficientnet", **extra)


def test_timm_pretrained_is_refused_offline_without_a_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    import timm

    calls: list[Any] = []
    monkeypatch.setattr(timm, "create_model", lambda *a, **k: calls.append((a, k)))
    src = TimmSource(source="timm", model_name="test_efficientnet", pretrained=True, allow_unpinned=True)
    with pytest.raises(BuildError, match="HF_HUB_OFFLINE is set") as exc:
        build_model(src, spec_dir=Path("."))
    assert calls == [] and "\n" not in str(exc.value)


def test_timm_local_weights_load_strictly_with_their_sha256(tmp_path: Path) -> None:
    import torch

    path, sha = _timm_weights(tmp_path, num_classes=3)
    model = build_model(TimmSource(source="timm", model_name="test_efficientnet", kwargs={"num_classes": 3},
                                   weights=path.name, sha256=sha), spec_dir=tmp_path)
    from safetensors.torch import load_file

    state = load_file(str(path))
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with pytest.raises(BuildError, match="sha256 mismatch"):
        build_model(TimmSource(source="timm", model_name="test_efficientnet", kwargs={"num_classes": 3},
                               weights=path.name, sha256="0" * 64), spec_dir=tmp_path)


# ----------------------------------------------------------------------------- 5. weights dtype/shape/finite
def _affine_weights(tmp_path: Path, name: str, **tensors: Any) -> tuple[str, str]:
    from safetensors.torch import save_file

    from registry.build import sha256_file

    path = tmp_path / f"{name}.safetensors"
    save_file(tensors, str(path))
    return path.name, sha256_file(path)


@pytest.mark.parametrize("case", ["float16", "int8", "float64", "nan", "inf", "shape"])
def test_weights_with_matching_sha256_but_wrong_dtype_shape_or_values_are_refused(tmp_path: Path, case: str) -> None:
    import torch

    good = {"scale": torch.ones(2), "shift": torch.zeros(2)}
    bad = {
        "float16": {k: v.half() for k, v in good.items()},
        "int8": {k: v.to(torch.int8) for k, v in good.items()},
        "float64": {k: v.double() for k, v in good.items()},
        "nan": {"scale": torch.full((2,), float("nan")), "shift": torch.zeros(2)},
        "inf": {"scale": torch.ones(2), "shift": torch.tensor([0.0, float("inf")])},
        "shape": {"scale": torch.ones(3), "shift": torch.zeros(3)},
    }[case]
    name, sha = _affine_weights(tmp_path, case, **bad)
    src = ZooSource(source="zoo", factory="zoo_demo_plugin:build_affine", weights=name, sha256=sha)
    with pytest.raises(BuildError, match="expects|NaN or inf") as exc:
        build_model(src, spec_dir=tmp_path)
    assert "scale" in str(exc.value) or "shift" in str(exc.value)
    if case in ("nan", "inf"):
        model = build_model(src.model_copy(update={"allow_nonfinite": True}), spec_dir=tmp_path)
        assert not bool(torch.isfinite(torch.cat([p.detach() for p in model.parameters()])).all())


def test_malformed_safetensors_is_one_line_build_error(tmp_path: Path) -> None:
    from registry.build import sha256_file

    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\xff" * 64)
    src = ZooSource(source="zoo", factory="zoo_demo_plugin:build_affine", weights=path.name, sha256=sha256_file(path))
    with pytest.raises(BuildError, match="not a readable safetensors file") as exc:
        build_model(src, spec_dir=tmp_path)
    assert "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- 6. hub pinning, local ids
def test_org_less_hub_id_needs_a_revision() -> None:
    with pytest.raises(ValueError, match="pinned 40-hex revision"):
        HubSource(source="transformers", model_class="AutoModel", id="gpt2")
    HubSource(source="transformers", model_class="AutoModel", id="gpt2", revision="a" * 40)
    HubSource(source="transformers", model_class="AutoModel", id="./gpt2")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from registry.conformance import _tiny_checkpoint

    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="org/m", allow_unpinned=True,
                    tiny={"config": TINY_QWEN})
    return Path(_tiny_checkpoint(src, tmp_path_factory.mktemp("tinyq")).id)


def test_relative_local_id_resolves_against_the_spec_folder(tiny_folder: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    spec_dir = tmp_path / "specs"
    shutil.copytree(tiny_folder, spec_dir / "models" / "tiny")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="./models/tiny")
    assert build_model(src, spec_dir=spec_dir).config.model_type == "qwen2"
    outside = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="../tiny-outside")
    shutil.copytree(tiny_folder, tmp_path / "tiny-outside")
    with pytest.raises(BuildError, match="outside the spec's folder"):
        build_model(outside, spec_dir=spec_dir)
    with pytest.raises(BuildError, match="outside the spec's folder"):
        build_model(outside.model_copy(update={"id": str(tmp_path / "tiny-outside")}), spec_dir=spec_dir)
    assert build_model(outside, spec_dir=spec_dir, allow_outside_paths=True).config.model_type == "qwen2"


def test_weights_outside_the_spec_folder_need_the_caller(tmp_path: Path) -> None:
    import shutil

    (tmp_path / "specs").mkdir()
    shutil.copy(DEMO_WEIGHTS, tmp_path / "w.safetensors")
    from registry.build import sha256_file

    src = ZooSource(source="zoo", factory="zoo_demo_plugin:build_affine", weights="../w.safetensors",
                    sha256=sha256_file(DEMO_WEIGHTS))
    with pytest.raises(BuildError, match="outside the spec's folder"):
        build_model(src, spec_dir=tmp_path / "specs")
    assert build_model(src, spec_dir=tmp_path / "specs", allow_outside_paths=True) is not None


# ----------------------------------------------------------------------------- 9. build/run failures
@pytest.mark.parametrize("config,field,match", [
    ("{dim: 2, bogus: 1}", "config.bogus", "unknown parameter"),
    ("{dim: abc}", "config.dim", "integer"),
    ("{dim: 1000000000}", "config.dim", "less than or equal to 4096"),
])
def test_factory_config_is_validated_before_the_call(tmp_path: Path, config: str, field: str, match: str) -> None:
    spec = _write_demo_spec(tmp_path, "cfg-demo", f'{{source: zoo, factory: "zoo_demo_plugin:build_affine", config: {config}}}')
    with pytest.raises(ParamError, match=match) as exc:
        build_pipeline(load_spec_file(spec), file=spec, variant="toy", use_cache=False)
    msg = str(exc.value)
    assert msg.startswith(f"{spec}:11:") and f"models.model.variants.toy.{field}" in msg and "\n" not in msg, msg


@pytest.mark.parametrize("config,field", [
    ({"num_train_timesteps": 10**12}, "num_train_timesteps"),
    ({"beta_end": 5.0}, "beta_end"),
    ({"mixture": "nope"}, "mixture"),
])
def test_analytic_model_sizes_are_bounded(config: dict[str, Any], field: str) -> None:
    src = ZooSource(source="zoo", factory="zoo.common.gmm:analytic_model", config=config)
    with pytest.raises(ParamError, match=field):
        build_model(src, spec_dir=Path("."))


def test_a_failing_factory_is_one_line_naming_the_config(tmp_path: Path) -> None:
    src = ZooSource(source="zoo", factory="zoo.common.digits:build_digits_unet",
                    config={"block_out_channels": [8, 16, 32]})  # 3 channels for 2 block types: diffusers raises
    with pytest.raises(BuildError, match="failed with this config") as exc:
        build_model(src, spec_dir=Path("."))
    assert "\n" not in str(exc.value)


def _is_bounded(tp: Any, metadata: list[Any]) -> bool:
    """An int/float needs ``le``/``lt``, a list/tuple ``max_length``; unions need every member bounded."""
    import types
    import typing

    import annotated_types

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        from pydantic.fields import FieldInfo

        extra = [m2 for m in tp.__metadata__ for m2 in (m.metadata if isinstance(m, FieldInfo) else [m])]
        return _is_bounded(args[0], [*metadata, *extra])
    if origin in (typing.Union, types.UnionType):
        return all(_is_bounded(a, metadata) for a in args)
    if tp in (bool, str, type(None)) or origin is typing.Literal:
        return True
    from registry.limits import Bound  # a per-call limit (registry.limits): bounded by the current limit

    if tp in (int, float):
        return any(isinstance(m, (annotated_types.Le, annotated_types.Lt, Bound)) for m in metadata)
    if origin in (list, tuple) or tp in (list, tuple):
        return any(isinstance(m, (annotated_types.MaxLen, Bound)) for m in metadata)
    return True  # other types (models, callables) are not sizes


def _numeric_fields_without_upper_bound(model: Any) -> list[str]:
    """Fields holding an int/float without ``le``/``lt``, or a list/tuple without ``max_length``."""
    return [name for name, info in model.model_fields.items() if not _is_bounded(info.annotation, list(info.metadata))]


def test_every_size_of_every_builtin_procedure_and_factory_is_bounded() -> None:
    """Invariant: every int/float parameter a built-in spec can set (procedure Params, CliInputs,
    factory configs) has an upper bound, so no spec allocates terabytes or loops for ever."""
    import zoo
    from registry.contract import _FACTORY_PARAMS, factory_params
    from registry.resolve import resolve as res

    unbounded = []
    for name in zoo.list():
        spec = zoo.spec(name)
        for section in (spec.samplers, spec.recipes):
            for proc in section.values():
                cls = res(proc.target, kind="procedure")
                for model in (cls.Params, getattr(cls, "CliInputs", None)):
                    if model is not None:
                        unbounded += [f"{proc.target}.{model.__name__}.{f}" for f in _numeric_fields_without_upper_bound(model)]
        for role in spec.models.values():
            for src in role.variants.values():
                if isinstance(src, ZooSource):
                    model = factory_params(res(src.factory, kind="factory"))
                    unbounded += [f"{src.factory}.{f}" for f in _numeric_fields_without_upper_bound(model)]
    assert _FACTORY_PARAMS and not sorted(set(unbounded)), sorted(set(unbounded))


@pytest.mark.parametrize("params", [{"n_lanes": 10**8}, {"max_new_tokens": 10**9}, {"verify_window": 10**9}])
def test_poe_bridge_sizes_are_bounded(params: dict[str, int]) -> None:
    from pydantic import ValidationError

    from zoo.methods.poe_bridge import PoEBridgeSampler

    with pytest.raises(ValidationError, match="less than or equal"):
        PoEBridgeSampler.Params(**params)


def test_sigma_min_has_a_positive_floor() -> None:
    from pydantic import ValidationError

    from zoo.methods.f_dpmsolver import FDPMSolverSampler

    with pytest.raises(ValidationError, match="greater than or equal to 0.000001"):
        FDPMSolverSampler.Params(use_karras_sigmas=True, sigma_min=1e-300)


def test_seed_overflow_is_a_clear_error(tmp_path: Path) -> None:
    import zoo

    pipe = zoo.load(str(DEMO))
    for seed in (2**70, -1):
        with pytest.raises(ParamError, match=r"seed: expected an integer in \[0, 2\*\*63 - 1\]"):
            pipe(seed=seed, n=2)
    res = _zoo(["run", str(DEMO), "--seed", str(2**80)], _env(tmp_path, ZOO_ALLOWED_PACKAGES="zoo_demo_plugin"))
    assert res.returncode == 2 and "--seed: expected an integer" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_failing_pipeline_call_is_one_line_run_error() -> None:
    import zoo

    import torch

    pipe = zoo.load(str(DEMO))
    with pytest.raises(RunError, match=r"demo-gaussian \(gaussian\) failed: RuntimeError") as exc:
        pipe(seed=0, noise=torch.zeros(2, 5))  # passes the inputs model (a tensor), fails inside (the model has dim 2)
    assert "\n" not in str(exc.value)
    with pytest.raises(ParamError, match=r"^input noise of GaussianSampler: Input should be an instance of Tensor") as exc:
        pipe(seed=0, noise="not a tensor")  # refused by the inputs model before the method runs
    assert "\n" not in str(exc.value)


def test_a_plugin_entry_point_naming_a_denied_package_is_ignored_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as md

    import registry.resolve as rr

    fake = md.EntryPoint(name="evil", value="pickle", group=rr.PLUGIN_GROUP)
    monkeypatch.setattr(md, "entry_points", lambda group=None: [fake] if group == rr.PLUGIN_GROUP else [])
    monkeypatch.setattr(rr, "_plugins_loaded", False)
    with pytest.warns(UserWarning, match="entry point 'evil' ignored.*'pickle' may not be allowed"):
        allowed = rr.allowed_packages()
    assert "pickle" not in allowed
