"""Builder: remote-code consent on both sides, requires, entry-point discovery, model cache."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.build import build_model, check_requires
from registry.conformance import _tiny_checkpoint
from registry.errors import BuildError, RequirementError
from registry.spec import HubSource, Spec

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
TINY = {"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}


@pytest.fixture(scope="module")
def tiny_remote_source(tmp_path_factory: pytest.TempPathFactory) -> HubSource:
    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="org/model", allow_unpinned=True,
                    trust_remote_code=True, tiny={"config": TINY})
    return _tiny_checkpoint(src, tmp_path_factory.mktemp("tiny"))


def test_remote_code_needs_the_caller_too(tiny_remote_source: HubSource) -> None:
    with pytest.raises(BuildError, match="pass trust_remote_code=True"):
        build_model(tiny_remote_source, spec_dir=Path("."), trust_remote_code=False, allow_outside_paths=True)
    model = build_model(tiny_remote_source, spec_dir=Path("."), trust_remote_code=True, allow_outside_paths=True)
    assert model.config.model_type == "qwen2"


def test_remote_code_kill_switch(tiny_remote_source: HubSource, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_DISABLE_REMOTE_CODE", "1")
    with pytest.raises(BuildError, match="ZOO_DISABLE_REMOTE_CODE"):
        build_model(tiny_remote_source, spec_dir=Path("."), trust_remote_code=True, allow_outside_paths=True)


def test_unpinned_hub_id_is_rejected_by_the_schema() -> None:
    with pytest.raises(ValueError, match="pinned 40-hex revision"):
        HubSource(source="transformers", model_class="AutoModel", id="org/model")


def test_requires_names_the_package_to_upgrade() -> None:
    import yaml

    data = yaml.safe_load((FIXTURES / "demo-gaussian.yaml").read_text())
    data["requires"] = {"torch": ">=99"}
    with pytest.raises(RequirementError, match=r"needs torch>=99, .* is installed: pip install \"torch>=99\""):
        check_requires(Spec.model_validate(data))
    data["requires"] = {"surely-not-a-package-zz": ">=1"}
    with pytest.raises(RequirementError, match="not installed"):
        check_requires(Spec.model_validate(data))


def test_offline_hub_id_fails_in_one_line() -> None:
    src = HubSource(source="transformers", model_class="AutoModelForCausalLM", id="org/not-cached",
                    revision="a" * 40)
    with pytest.raises(BuildError) as exc:
        build_model(src, spec_dir=Path("."))
    assert "offline" in str(exc.value) and "\n" not in str(exc.value)


def test_models_are_cached_per_process() -> None:
    import zoo

    a = zoo.load(str(FIXTURES / "demo-gaussian.yaml"))
    b = zoo.load(str(FIXTURES / "demo-gaussian.yaml"), temperature=2.0)
    assert a.models["model"] is b.models["model"]
    assert a.procedures["gaussian"].params.temperature == 1.0 and b.procedures["gaussian"].params.temperature == 2.0


def test_pipeline_samplers_is_a_deprecated_alias_of_procedures() -> None:
    """``Pipeline.samplers`` (it held recipes too) is now ``Pipeline.procedures``; the old name warns for one release
    and is the very same dict."""
    import zoo

    pipe = zoo.load(str(FIXTURES / "demo-gaussian.yaml"))
    with pytest.warns(DeprecationWarning, match=r"Pipeline.samplers is deprecated, use Pipeline.procedures"):
        alias = pipe.samplers
    assert alias is pipe.procedures and "gaussian" in alias


def test_entry_point_plugin_specs_are_discovered(tmp_path: Path) -> None:
    """A package shipping specs through the `zoo.specs` entry point is listed with no path setup."""
    site = tmp_path / "site"
    (site / "myplug_specs").mkdir(parents=True)
    (site / "myplug_specs" / "__init__.py").write_text("")
    (site / "myplug_specs" / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    (site / "myplug_specs" / "plug.yaml").write_text(
        (FIXTURES / "demo-gaussian.yaml").read_text().replace("name: demo-gaussian", "name: plugged-in"))
    dist = site / "myplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[zoo.specs]\nmine = myplug_specs\n\n[zoo.plugins]\nmine = zoo_demo_plugin\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(FIXTURES.parent)])}
    env.pop("ZOO_ALLOWED_PACKAGES", None)
    res = subprocess.run([sys.executable, "-m", "zoo.cli", "show", "plugged-in", "--no-detect"], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert "entry point mine (myplug_specs)" in res.stdout
    res = subprocess.run([sys.executable, "-m", "zoo.cli", "validate", str(site / "myplug_specs" / "plug.yaml")],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr  # zoo_demo_plugin allowed through the zoo.plugins entry point


def test_params_by_variant_apply_to_their_variant_only(tmp_path: Path) -> None:
    import zoo

    (tmp_path / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    text = (FIXTURES / "demo-gaussian.yaml").read_text().replace(
        'params: {temperature: 1.0}}', 'params: {temperature: 1.0}, params_by_variant: {toy: {steps: 3}, full: {steps: 7}}}')
    (tmp_path / "v.yaml").write_text(text.replace("name: demo-gaussian", "name: demo-variant-params"))
    pipe = zoo.load(str(tmp_path / "v.yaml"))
    assert pipe.variant == "toy" and pipe.procedures["gaussian"].params.steps == 3
    assert zoo.load(str(tmp_path / "v.yaml"), steps=5).procedures["gaussian"].params.steps == 5  # the caller wins
    (tmp_path / "w.yaml").write_text(text.replace("full: {steps: 7}", "fast: {steps: 7}"))
    with pytest.raises(Exception, match="unknown variant"):
        zoo.spec(str(tmp_path / "w.yaml"))


def test_undeclared_dtype_is_refused_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dtype="float32"`` on a float64-only variant (f-dpmsolver's toy) is one
    HardwareError naming the declared dtypes, raised before any model is built (it used to be
    accepted and crash later with a raw RuntimeError)."""
    import zoo
    from registry import build
    from registry.errors import HardwareError

    built: list[object] = []
    monkeypatch.setattr(build, "build_model", lambda *a, **k: built.append(a) or (_ for _ in ()).throw(AssertionError("built")))
    with pytest.raises(HardwareError) as exc:
        zoo.load("f-dpmsolver", variant="toy", dtype="float32")
    msg = str(exc.value)
    assert "dtype float32 not declared for variant toy (declared: float64)" in msg and "\n" not in msg
    assert "f-dpmsolver.yaml:" in msg and not built
