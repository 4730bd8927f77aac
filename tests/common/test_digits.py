"""The digits stack: fixed splits, classifier, Frechet distance, and the shared class-conditional DiT."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.common import digits as D


def test_split_is_fixed_stratified_and_in_range():
    """1,437 / 360 stratified split, images in [-1, 1] with shape (N, 1, 8, 8); two calls give equal tensors."""
    s = D.digits_split()
    assert s.x_train.shape == (1437, 1, 8, 8) and s.x_test.shape == (360, 1, 8, 8)
    assert float(s.x_train.min()) == -1.0 and float(s.x_train.max()) == 1.0
    counts = torch.bincount(s.y_test)
    assert counts.numel() == 10 and int(counts.min()) >= 35 and int(counts.max()) <= 37
    D.digits_split.cache_clear()
    s2 = D.digits_split()
    assert torch.equal(s.x_train, s2.x_train) and torch.equal(s.y_test, s2.y_test)


def test_classifier_accuracy_on_test_split():
    """The deterministic logistic-regression classifier reaches >= 95 % on the held-out split (measured 96.1 %)."""
    acc = D.classifier_accuracy()
    assert acc >= 0.95
    assert D.classifier_accuracy() == acc


def test_frechet_distance_properties():
    """FD(a, a) = 0; FD is symmetric; the Gaussian formula matches (m1 - m2)^2 + (s1 - s2)^2 in 1-D and the
    commuting-covariance closed form ||m1 - m2||^2 + sum (sqrt(l1) - sqrt(l2))^2; pixel noise raises FD above the train split's."""
    s = D.digits_split()
    assert D.frechet_distance(s.x_test) == pytest.approx(0.0, abs=1e-8)
    a, b = s.x_train[:400], s.x_test
    assert D.frechet_distance(a, b) == pytest.approx(D.frechet_distance(b, a), rel=1e-9)
    f = D._frechet_gaussians
    assert f(np.array([1.0]), np.array([[4.0]]), np.array([0.0]), np.array([[1.0]])) == pytest.approx(1 + 1)
    l1, l2 = np.array([1.0, 2.0, 3.0]), np.array([4.0, 0.5, 3.0])
    m = np.array([0.5, 0.0, -1.0])
    assert f(m, np.diag(l1), 0 * m, np.diag(l2)) == pytest.approx(1.25 + ((np.sqrt(l1) - np.sqrt(l2)) ** 2).sum())
    noisy = b + 0.5 * torch.randn(b.shape, generator=torch.Generator().manual_seed(0))
    assert D.frechet_distance(noisy) > 1.5 * D.frechet_distance(a)  # measured 0.147 vs 0.086


def test_dit_class_conditioning_changes_the_output():
    """Same noise and timestep, different class labels -> different DiT outputs (for a non-degenerate init
    the adaLN-Zero modulation is zero, so we perturb it first to make the label path live)."""
    torch.manual_seed(0)
    m = D.build_digits_dit()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    t = torch.tensor([500, 500])
    a = m(x, timestep=t, class_labels=torch.tensor([3, 3])).sample
    b = m(x, timestep=t, class_labels=torch.tensor([3, 7])).sample
    assert torch.equal(a[0], b[0]) and not torch.allclose(a[1], b[1], atol=1e-4)


def test_sample_digits_learned_sigma_and_guidance_shapes():
    """sample_digits runs a learned-sigma DiT (out_channels = 2) through DDIM with and without guidance, is
    seed-deterministic and returns (B, 1, 8, 8)."""
    torch.manual_seed(0)
    m = D.build_digits_dit(out_channels=2)
    labels = torch.tensor([0, 5])
    x1 = D.sample_digits(m, labels, 3, "ddim", seed=4)
    x2 = D.sample_digits(m, labels, 3, "ddim", seed=4, guidance_scale=2.0)
    assert x1.shape == (2, 1, 8, 8) and torch.isfinite(x2).all()
    assert torch.equal(x1, D.sample_digits(m, labels, 3, "ddim", seed=4))


def test_shipped_digits_dit_is_small_and_builds_from_its_one_declaration():
    """The shipped checkpoint is under 1 MB and the engine builds the spec's ``dit`` role from it (strict, sha256-checked)."""
    from shipped import digits_dit, spec_file

    assert spec_file("digits", "weights/digits-dit.safetensors").stat().st_size < 1_000_000
    assert sum(p.numel() for p in digits_dit().parameters()) == 200_900


@pytest.mark.slow
def test_shipped_dit_samples_are_recognised():
    """DDIM-50 class-conditional samples (20 per class) are recognised by the classifier at >= 80 %."""
    from shipped import digits_dit

    m = digits_dit()
    labels = torch.arange(10).repeat_interleave(20)
    x = D.sample_digits(m, labels, 50, "ddim", seed=0)
    assert D.digits_classifier().accuracy(x, labels) >= 0.8


def test_digits_dit_factory_with_the_shipped_weights_is_the_spec_role_and_validates_its_config():
    """``source: zoo`` with ``zoo.common.digits:build_digits_dit`` and the shipped file (as ``specs/digits.yaml`` declares
    it) gives the same weights as the spec's role; an out-of-range config is refused by the factory's params model."""
    import zoo
    from registry.build import build_model
    from registry.errors import ParamError

    spec = zoo.spec("digits")
    src = spec.models["dit"].variants["toy"]
    folder = zoo.entry("digits").path.parent
    built = build_model(src, spec_dir=folder)
    ref = zoo.load("digits", variant="toy").models["dit"].state_dict()
    assert all(torch.equal(v, ref[k]) for k, v in built.state_dict().items()) and built.state_dict().keys() == ref.keys()
    with pytest.raises(ParamError, match="num_layers"):
        build_model(src.model_copy(update={"config": {"num_layers": 10_000}}), spec_dir=folder)


def test_the_digits_unet_is_declared_once_and_every_user_gets_that_model_bit_for_bit():
    """F-DPMSolver's digits denoiser and PROBE's held-out UNet name the one declaration in ``specs/digits.yaml``
    (``from_spec: digits``): both pipelines hold the very model the digits spec builds, equal to the declared file."""
    from safetensors.torch import load_file

    import zoo

    pipe = zoo.load("digits", variant="toy")
    shipped = load_file(str(pipe.ctx.spec_file("weights/f-dpmsolver-digits-unet.safetensors")))
    unet = pipe.models["unet"]
    for spec, role, variant in (("f-dpmsolver", "denoiser", "digits"), ("probe", "unet", "toy")):
        src = zoo.spec(spec).models[role].variants[variant]
        assert (src.source, src.from_spec, src.from_role, src.share) == ("role", "digits", "unet", True), spec
        assert zoo.load(spec, variant=variant).models[role] is unet, spec
    state = unet.state_dict()
    assert state.keys() == shipped.keys()
    assert all(torch.equal(state[k], v) for k, v in shipped.items())
    assert unet.data_mean == D.DIGITS_MEAN == pytest.approx(float(D.digits_images().mean()), abs=1e-7)


def test_zoo_bench_digits_scores_the_shipped_dit_per_sampler_setting(tmp_path, capsys):
    """`zoo bench digits` (the spec's bench:) scores the shipped DiT's samples for each sampler setting: the
    reference rows are the classifier's own test accuracy and a zero FD of the test split to itself, every
    setting's samples are recognised far above chance (10 %), and the table, JSON and figure land in --out-dir."""
    import json

    from zoo.cli import main
    from zoo.common.digits_bench import SETTINGS

    assert main(["bench", "digits", "--per-class", "2", "--out-dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "digits-bench.json").read_text())["result"]["rows"]
    assert [(r["samples"], r["steps"], r["guidance"]) for r in rows[2:]] == SETTINGS
    assert rows[0]["accuracy"] == pytest.approx(D.classifier_accuracy()) and rows[0]["fd"] == pytest.approx(0.0, abs=1e-9)
    assert all(r["accuracy"] >= 0.5 for r in rows[2:]), rows
    assert "| ddim | 50 | 1.0 |" in capsys.readouterr().out
    assert "| dpmsolver++ | 20 | 1.0 |" in (tmp_path / "digits-bench.md").read_text()
    assert (tmp_path / "digits-dit-samples.png").stat().st_size > 2000
