"""A user spec in a temp folder, reusing a built-in implementation with
different parameters, is listed, loaded, run and conformance-checked with no edit to the repo."""
from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_user_spec_reusing_f_dpmsolver_with_other_params(tmp_path: Path, capsys) -> None:
    import zoo
    from registry.conformance import run_checks

    data = yaml.safe_load((REPO / "specs" / "f-dpmsolver.yaml").read_text())
    target = data["samplers"][data["default"]]["target"]
    mine = {
        "name": "my-f-ddim-20",
        "title": "F-DDIM with 20 steps on the toy mixture (a user's spec)",
        "task": data["task"],
        "implementation": data["implementation"],
        "models": {"denoiser": {"kind": "vp-diffusion-model", "variants": {"toy": data["models"]["denoiser"]["variants"]["toy"]}}},
        "samplers": {"f-ddim-20": {"target": target, "params": {"num_inference_steps": 20}}},
        "default": "f-ddim-20",
        "variants": ["toy"],
        "hardware": {"toy": data["hardware"]["toy"]},
        "invariants": data["invariants"][:2],
    }
    folder = tmp_path / "my-specs"
    folder.mkdir()
    (folder / "my-f-ddim-20.yaml").write_text(yaml.safe_dump(mine, sort_keys=False))

    assert zoo.add_specs(folder) == ["my-f-ddim-20"]
    assert "my-f-ddim-20" in zoo.list("my-*", task=data["task"])
    pipe = zoo.load("my-f-ddim-20")
    assert pipe.variant == "toy" and pipe.procedures["f-ddim-20"].params.num_inference_steps == 20
    x = pipe(seed=0, batch_size=3).samples
    assert x.shape[0] == 3 and bool(x.isfinite().all())
    capsys.readouterr()
    assert run_checks([zoo.entry("my-f-ddim-20")], verbose=True)
    out = capsys.readouterr().out
    assert "0 failed" in out and "my-f-ddim-20::samplers[f-ddim-20]::batch-independence" in out
    assert not (REPO / "specs" / "my-f-ddim-20.yaml").exists()
