"""Behaviour of ``zoo.methods.probe`` beyond the spec's invariants: every invariant's negative control (a
plausible wrong implementation fails the same check), the shipped detector pinned in the spec and in the code,
the timm role as the engine builds it, stage 1 moving the critic's score, stage 2 leaving its input alone, the
class-balanced batches, and the zoo run / bench paths."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from zoo.common.lora import LoRALinear, inject_lora
from zoo.methods.probe import core
from zoo.methods.probe import invariants as inv
from zoo.methods.probe.core import FAKE, REAL, balanced_accuracy, probe_stage1


def _models() -> tuple[object, object]:
    """The toy's shared DiT and shipped detector as the engine builds them (the checks only read them)."""
    import zoo

    models = zoo.load("probe", variant="toy").models
    return models["dit"], models["detector"]

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- negative controls
def _accuracy(pred: torch.Tensor, label: torch.Tensor) -> float:
    return float((torch.as_tensor(pred) == torch.as_tensor(label)).double().mean())


def _tpr_only(pred: torch.Tensor, label: torch.Tensor) -> float:
    pos = torch.as_tensor(label) == FAKE
    return float((torch.as_tensor(pred)[pos] == FAKE).double().mean())


def test_symmetry_check_rejects_plain_accuracy_and_tpr_only() -> None:
    """Plain accuracy is symmetric but a constant detector scores the class ratio, not 0.5, on imbalanced sets;
    TPR alone is not symmetric in the class names."""
    inv.check_bacc_symmetry_and_constant(balanced_accuracy, 3)
    with pytest.raises(AssertionError):
        inv.check_bacc_symmetry_and_constant(_accuracy, 3)
    with pytest.raises(AssertionError):
        inv.check_bacc_symmetry_and_constant(_tpr_only, 3)


def test_duplication_check_rejects_plain_accuracy_and_swapped_denominators() -> None:
    def swapped(pred, label):  # divides TP by the number of reals and TN by the number of fakes
        pred, label = torch.as_tensor(pred), torch.as_tensor(label)
        tp = float(((pred == FAKE) & (label == FAKE)).sum())
        tn = float(((pred == REAL) & (label == REAL)).sum())
        return 0.5 * (tp / float((label == REAL).sum()) + tn / float((label == FAKE).sum()))

    inv.check_bacc_balanced_and_duplication(balanced_accuracy, 5)
    with pytest.raises(AssertionError):
        inv.check_bacc_balanced_and_duplication(_accuracy, 5)
    with pytest.raises(AssertionError):
        inv.check_bacc_balanced_and_duplication(swapped, 5)


def test_balanced_accuracy_refuses_one_class_and_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="both classes"):
        balanced_accuracy(torch.tensor([0, 1]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="entries"):
        balanced_accuracy(torch.tensor([0, 1, 1]), torch.tensor([0, 1]))


def test_zero_b_check_rejects_a_lora_initialised_with_nonzero_b() -> None:
    def nonzero_b(model, targets, rank):
        names = inject_lora(model, targets, rank=rank)
        for m in model.modules():
            if isinstance(m, LoRALinear):
                for b in m.lora_B.values():
                    nn.init.normal_(b, std=1e-3)
        return names

    dit, _ = _models()
    inv.check_zero_b_identity(inject_lora, 4, dit)
    with pytest.raises(AssertionError, match="max"):
        inv.check_zero_b_identity(nonzero_b, 4, dit)


def test_frozen_check_rejects_a_critic_left_in_train_mode_and_a_no_op_stage1() -> None:
    """A stage 1 that runs the critic in train mode updates its BatchNorm running statistics (bit-identity
    fails); a stage 1 that never trains the LoRA would pass vacuously, so the check also requires motion."""
    def train_mode_critic(dit, det, **kw):
        det.train()
        x = core.generate({"dit": dit}, core.SEEN, torch.tensor([1, 2]), 0)
        det(x)  # BatchNorm updates its running mean/var in train mode
        return probe_stage1(dit, det, **kw)

    def no_op(dit, det, **kw):
        run = probe_stage1(dit, det, **{**kw, "steps": 0})
        run.l_prec.append(0.0)
        return run

    models = _models()
    inv.check_detector_frozen(probe_stage1, 1, *models)
    with pytest.raises(AssertionError, match="changed during stage 1"):
        inv.check_detector_frozen(train_mode_critic, 1, *models)
    with pytest.raises(AssertionError, match="did not move"):
        inv.check_detector_frozen(no_op, 1, *models)


def test_buffer_check_rejects_snapshots_at_the_wrong_steps() -> None:
    def off_by_one(dit, det, **kw):
        run = probe_stage1(dit, det, **kw)
        run.buffer_steps = [s - 1 for s in run.buffer_steps]
        return run

    with pytest.raises(AssertionError):
        inv.check_buffer(off_by_one, 0, 2, 1, 1, *_models())


# ----------------------------------------------------------------------------- shipped detector and the timm role
def test_the_timm_role_loads_the_declared_detector_file_bit_for_bit() -> None:
    from safetensors.torch import load_file

    import zoo

    pipe = zoo.load("probe", variant="toy")
    assert zoo.spec("probe").models["detector"].variants["toy"].source == "timm"
    built = pipe.models["detector"]
    assert not built.training, "the engine must hand out the timm role in eval mode"
    shipped = load_file(str(pipe.ctx.spec_file("weights/probe-detector.safetensors")))  # sha256 from the spec
    assert built.state_dict().keys() == shipped.keys()
    for k, v in built.state_dict().items():
        assert torch.equal(v, shipped[k]), k


def test_timm_role_refuses_a_tampered_detector_file(tmp_path: Path) -> None:
    """The shipped file with one byte changed fails its sha256 in the engine's timm path (one BuildError line)."""
    from registry.build import build_model
    from registry.errors import ZooError

    import zoo

    src = zoo.spec("probe").models["detector"].variants["toy"]
    data = bytearray(zoo.load("probe", variant="toy").ctx.spec_file("weights/probe-detector.safetensors").read_bytes())
    data[-1] ^= 1
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "probe-detector.safetensors").write_bytes(bytes(data))
    with pytest.raises(ZooError, match="sha256"):
        build_model(src, spec_dir=tmp_path)


# ----------------------------------------------------------------------------- stage 1 / stage 2 behaviour
def test_stage1_lowers_the_frozen_critics_fake_score() -> None:
    """The critic's gradient reaches the LoRA: 12 steps at lr 3e-3 lower the mean P(fake) of the training
    batches (first 3 vs last 3 steps) while the detector is unchanged (the invariant checks the latter)."""
    dit, det = _models()
    run = probe_stage1(dit, det, steps=12, lambda_prec=0.0, lr=3e-3, batch=8, buffer_every=6, rank=4, seed=0)
    first, last = sum(run.fake_prob[:3]) / 3, sum(run.fake_prob[-3:]) / 3
    assert last < first - 0.1, (first, last)
    assert run.l_prec[0] == 0.0  # B = 0 at the first step: the adapted sample equals the base sample


def test_stage2_fine_tunes_a_copy_and_uses_the_buffer_as_a_fake_pool() -> None:
    _, det = _models()
    before = {k: v.clone() for k, v in det.state_dict().items()}
    real, fakes, buf = torch.randn(16, 1, 8, 8), torch.randn(16, 1, 8, 8), torch.randn(16, 1, 8, 8) + 3
    tuned = core.finetune_detector(det, real, fakes, buf, steps=2, lr=1e-3, seed=0, batch=8)
    assert all(torch.equal(v, before[k]) for k, v in det.state_dict().items())
    assert not tuned.training and any(not torch.equal(v, before[k]) for k, v in tuned.state_dict().items())
    x, y = core._balanced_batch(real, [fakes, buf], 4, torch.Generator().manual_seed(0))
    assert (y == REAL).sum() == 4 and (y == FAKE).sum() == 4
    assert int((x[y == FAKE].mean((1, 2, 3)) > 1.5).sum()) == 2  # half the fakes come from the (shifted) buffer


def test_no_buffer_recipe_matches_a_stage2_on_original_fakes_only() -> None:
    """``use_buffer: false`` equals fine-tuning on real + original fakes with the same seed (bitwise)."""
    import zoo

    pipe = zoo.load("probe", variant="toy")
    kw = dict(stage1_steps=0, stage2_steps=3, n_eval=4, n_original=8)
    out = pipe.procedures["probe-no-buffer"](seed=3, **kw)
    from zoo.common.digits import digits_split

    ref = core.finetune_detector(pipe.models["detector"], digits_split().x_train[:8], core.seen_train_fakes(pipe.models["dit"], 8), None, 3,
                                 1e-3, 3)
    from zoo.methods.probe.procedures import bacc_table

    assert out["after"] == bacc_table(ref, pipe.models, 4, tuple(out["after"]))


# ----------------------------------------------------------------------------- CLI and bench
@pytest.mark.slow
def test_zoo_run_prints_the_table_and_writes_the_buffer_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoo.cli import main

    png = tmp_path / "buf.png"
    rc = main(["run", "probe", "--out", str(png), "--param", "stage1_steps=4", "--param", "buffer_every=2", "--param", "batch=4",
               "--param", "stage2_steps=4", "--param", "n_eval=16", "--param", "n_original=32"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "held-out mean" in text and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_bench_quick_writes_table_png_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from zoo.cli import main

    rc = main(["bench", "probe", "--quick", "--seeds", "0", "1", "--stage1-steps", "4", "--stage2-steps", "4", "--n-eval", "16",
               "--out-dir", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "probe-bench.json").read_text())["result"]
    assert set(res["arms"]) == {"probe", "probe-no-buffer", "probe-lambda0", "probe-no-critic", "probe-band", "probe-band-unsteered"}
    assert all(len(runs) == 2 for runs in res["arms"].values())
    assert (tmp_path / "probe.png").stat().st_size > 5000
    assert "held-out mean" in capsys.readouterr().out


# ----------------------------------------------------------------------------- boundary-band buffer (issue 39)
def test_band_check_rejects_an_unfiltered_buffer_and_a_per_snapshot_mean_filter() -> None:
    """The band check passes the real selection and fails two plausible wrong ones: no filter at all (the old
    buffer), and a filter on each snapshot's mean P(fake) instead of each sample's (keeps whole snapshots)."""
    def unfiltered(dit, det, **kw):
        return probe_stage1(dit, det, **{**kw, "buffer_band": None})

    def per_snapshot_mean(dit, det, **kw):
        lo, hi = kw["buffer_band"]
        run = probe_stage1(dit, det, **{**kw, "buffer_band": None})
        keep = torch.cat([torch.full((k,), lo <= p <= hi) for p, k in zip(run.buffer_fake_prob, run.buffer_kept)])
        keep[0] = True  # at least one snapshot kept whole, so the planted filter is never empty
        run.buffer, run.buffer_labels, run.buffer_sample_fake_prob = run.buffer[keep], run.buffer_labels[keep], run.buffer_sample_fake_prob[keep]
        return run

    models = _models()
    inv.check_band_buffer(probe_stage1, 0, *models)
    with pytest.raises(AssertionError):
        inv.check_band_buffer(unfiltered, 0, *models)
    with pytest.raises(AssertionError):
        inv.check_band_buffer(per_snapshot_mean, 0, *models)


def test_band_mask_is_the_closed_band() -> None:
    p = torch.tensor([0.0, 0.29, 0.3, 0.5, 0.7, 0.71, 1.0])
    assert core.band_mask(p, (0.3, 0.7)).tolist() == [False, False, True, True, True, False, False]


def test_buffer_size_caps_the_buffer_and_stops_stage1_early() -> None:
    dit, det = _models()
    run = probe_stage1(dit, det, steps=6, lambda_prec=1.0, lr=1e-3, batch=2, buffer_every=1, rank=2, seed=0, buffer_size=5)
    assert run.buffer.shape[0] == 5 and run.buffer_kept == [2, 2, 1] and len(run.l_probe) == 3


def test_default_buffer_is_unchanged_by_the_band_params() -> None:
    """Passing ``buffer_band`` / ``buffer_size`` / ``buffer_batch`` as None equals omitting them (the unfiltered buffer,
    every snapshot kept whole), the recipe's default is no band, and the band params validate (lo < hi, both in [0, 1])."""
    from pydantic import ValidationError

    from zoo.methods.probe.procedures import ProbeRecipe

    dit, det = _models()
    kw = dict(steps=2, lambda_prec=1.0, lr=1e-3, batch=3, buffer_every=1, rank=2, seed=4)
    a = probe_stage1(dit, det, **kw)
    b = probe_stage1(dit, det, **kw, buffer_band=None, buffer_size=None, buffer_batch=None)
    assert torch.equal(a.buffer, b.buffer) and a.buffer_kept == [3, 3] and a.l_probe == b.l_probe
    assert ProbeRecipe.Params().buffer_band is None
    for bad in ([0.7, 0.3], [0.3, 1.5], [0.1, 0.2, 0.3]):
        with pytest.raises(ValidationError):
            ProbeRecipe.Params(buffer_band=bad)
