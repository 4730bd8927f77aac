"""The conformance checks are registered per family (``registry/checks/``): the registry itself (order, one
family per check, a family added from outside the engine) and, per family, a planted spec or implementation
that breaks exactly the claim that family checks, caught with its message, beside the same spec unbroken."""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine_ext_helpers import planted_check
from registry import checks
from registry.catalog import Entry
from registry.checks import FAMILIES, Check, Skipped, SpecUnderCheck, checks_for, family
from registry.conformance import run_check
from registry.loader import load_spec_file

DEMO = Path(__file__).parent / "fixtures" / "specs"
DEMO_SPEC = (DEMO / "demo-gaussian.yaml").read_text()


def _entry(path: Path) -> Entry:
    return Entry(path.resolve(), "test", spec=load_spec_file(path.resolve()))


def _demo(tmp_path: Path, old: str = "", new: str = "") -> Entry:
    """The demo spec, copied beside its weights, with one planted change."""
    shutil.copy(DEMO / "demo-affine.safetensors", tmp_path)
    assert old in DEMO_SPEC
    (tmp_path / "demo.yaml").write_text(DEMO_SPEC.replace(old, new))
    return _entry(tmp_path / "demo.yaml")


def _run(entry: Entry, suffix: str) -> tuple[str, str]:
    found = [c for c in checks_for(entry) if c.id.endswith(f"::{suffix}")]
    assert len(found) == 1, [c.id for c in checks_for(entry)]
    return run_check(found[0])[:2]


# ----------------------------------------------------------------------------- the registry
def test_builtin_families_in_their_order() -> None:
    names = [f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}" for f in FAMILIES]
    assert names[:6] == ["files.spec_and_files", "build.builds_and_loading_paths", "procedures.bounded_inputs",
                         "procedures.procedure_contract", "invariants.invariants", "metrics.reproduced_metrics"]


def test_checks_for_is_the_families_checks_in_order(tmp_path: Path) -> None:
    e = _demo(tmp_path)
    s = SpecUnderCheck(e)
    per_family = [[c.id for c in fam(s)] for fam in FAMILIES]
    assert [c.id for c in checks_for(e)] == [i for ids in per_family for i in ids]
    assert all(per_family[:2]) and per_family[4] and per_family[5]  # the demo has files, builds, an invariant, a metric
    ids = [i for ids in per_family for i in ids]
    assert len(ids) == len(set(ids))


@pytest.fixture
def extra_family() -> Any:
    seen: list[str] = []

    @family
    def always_true(s: SpecUnderCheck) -> list[Check]:
        def fn() -> None:
            seen.append(s.name)
            assert s.spec.default in s.spec.samplers, "the default names no sampler"
        return [s.check("my-family[default-exists]", fn)]

    yield seen
    FAMILIES.remove(always_true)


def test_a_family_registered_outside_the_engine_runs_last(tmp_path: Path, extra_family: list[str]) -> None:
    e = _demo(tmp_path)
    ids = [c.id for c in checks_for(e)]
    assert ids[-1] == "demo-gaussian::my-family[default-exists]"
    assert _run(e, "my-family[default-exists]") == ("PASS", "")
    assert extra_family == ["demo-gaussian"]


def test_a_missing_requirement_skips_every_family_but_validates_and_requires(tmp_path: Path, extra_family: list[str]) -> None:
    e = _demo(tmp_path, "tags: [demo]", "tags: [demo]\nrequires: {no-such-package-zoo: \">=1\"}")
    statuses = {c.id.split("::", 1)[1]: run_check(c)[0] for c in checks_for(e)}
    assert statuses.pop("validates") == "PASS" and statuses.pop("requires") == "SKIP"
    assert set(statuses.values()) == {"SKIP"} and "my-family[default-exists]" in statuses
    assert extra_family == []


# ----------------------------------------------------------------------------- files
def test_files_family_catches_a_wrong_sha256(tmp_path: Path) -> None:
    good = _run(_demo(tmp_path), "weights[model.toy]")
    bad = _run(_demo(tmp_path, "sha256: 4095902e", "sha256: 5095902e"), "weights[model.toy]")
    assert good == ("PASS", "")
    assert bad[0] == "FAIL" and "demo-affine.safetensors: sha256 4095902e" in bad[1] and "!= spec 5095902e" in bad[1]


def test_files_family_catches_a_missing_file_and_a_bad_card(tmp_path: Path) -> None:
    e = _demo(tmp_path, "tags: [demo]", "tags: [demo]\ndocs: gone.md")
    (tmp_path / "demo-affine.safetensors").unlink()
    assert _run(e, "weights[model.toy]")[0] == "FAIL" and "is missing" in _run(e, "weights[model.toy]")[1]
    status, msg = _run(e, "validates")
    assert status == "FAIL" and "card gone.md does not exist" in msg


# ----------------------------------------------------------------------------- build
def test_build_family_catches_a_variant_that_does_not_build(tmp_path: Path) -> None:
    assert _run(_demo(tmp_path), "builds[toy]") == ("PASS", "")
    status, msg = _run(_demo(tmp_path, "config: {dim: 2}", "config: {dim: 3}"), "builds[toy]")
    assert status == "FAIL" and "demo-affine.safetensors" in msg, msg


def test_build_family_tests_a_hub_role_on_a_tiny_local_checkpoint(tmp_path: Path) -> None:
    assert _run(_demo(tmp_path), "loading-path[model.full]") == ("PASS", "")
    status, msg = _run(_demo(tmp_path, "tiny: {config: {model_type: qwen2,", "tiny: {config: {model_type: no-such-model-type,"),
                       "loading-path[model.full]")
    assert status == "FAIL" and "no-such-model-type" in msg


# ----------------------------------------------------------------------------- procedures
SAMPLER = textwrap.dedent('''
    from typing import Annotated

    import torch
    from registry.contract import Procedure, ProcedureParams
    from registry.limits import Bound


    class Draw(Procedure):
        Params = ProcedureParams
        batch_independent = True

        def __call__(self, *, seed: int = 0, noise: Annotated[torch.Tensor, Bound("rows")]):
            return {BODY}

        def example_inputs(self, batch_size: int = 2):
            return {"noise": torch.randn(batch_size, 2, generator=torch.Generator().manual_seed(0))}

        def input_rows(self, inputs):
            return [{"noise": row} for row in inputs["noise"].split(1)]

        def output_rows(self, outputs):
            return list(outputs.split(1))
    ''')


@pytest.mark.parametrize("body,check,needle", [
    ("noise + torch.randn(noise.shape)", "seeded-determinism", "tensors differ"),  # the global RNG, not the seed
    ("noise * noise.shape[0]", "batch-independence", "row 0"),  # a row depends on the batch it is in
])
def test_procedure_family_catches_a_planted_contract_breach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            body: str, check: str, needle: str) -> None:
    (tmp_path / "good").mkdir()
    good = planted_check(tmp_path / "good", monkeypatch, "zoo_good_draw",
                         SAMPLER.replace("{BODY}", "2 * noise"), "Draw", check)
    bad = planted_check(tmp_path, monkeypatch, "zoo_bad_draw", SAMPLER.replace("{BODY}", body), "Draw", check)
    assert good == ("PASS", "")
    assert bad[0] == "FAIL" and needle in bad[1], bad


# ----------------------------------------------------------------------------- invariants
def test_invariant_family_catches_an_unregistered_name(tmp_path: Path) -> None:
    assert _run(_demo(tmp_path), "invariant[temperature-scales-spread]") == ("PASS", "")
    e = _demo(tmp_path, "invariants: [temperature-scales-spread]", "invariants: [temperature-scales-spread, no-such-invariant]")
    status, msg = _run(e, "invariant[no-such-invariant]")
    assert status == "FAIL" and "'no-such-invariant' is not registered by zoo_demo_plugin" in msg


# ----------------------------------------------------------------------------- metrics
def test_metric_family_re_measures_and_catches_a_wrong_value(tmp_path: Path) -> None:
    key = "metric[mean-abs@standard-normal/toy]"
    assert _run(_demo(tmp_path), key) == ("PASS", "")
    status, msg = _run(_demo(tmp_path, "value: 0.7979", "value: 0.9"), key)
    assert status == "FAIL" and "mean-abs: measured 0.7" in msg and "spec says 0.9 ± 0.03" in msg


def test_a_slow_metric_is_skipped_unless_asked(tmp_path: Path) -> None:
    e = _demo(tmp_path, "tolerance: 0.03,", "tolerance: 0.03, slow: true,")
    (check,) = [c for c in checks_for(e) if "::metric[" in c.id]
    assert check.slow and run_check(check)[0] == "SKIP" and "slow; run `zoo check --slow demo-gaussian`" in run_check(check)[1]
    (slow_check,) = [c for c in checks_for(e, slow=True) if "::metric[" in c.id]
    assert run_check(slow_check)[0] == "PASS"


def test_skipped_is_the_engines_skip() -> None:
    from registry import conformance

    assert conformance.Skipped is Skipped is checks.base.Skipped
