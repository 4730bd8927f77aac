"""Issue #11 item 6 (the shared base): ``registry.outputs.ProcedureOutput`` behaves like diffusers'
BaseOutput / transformers' ModelOutput, and ``ImageOutput`` gives ``.images`` / ``.pil_images`` views."""
from __future__ import annotations

import pickle
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from registry.conformance import assert_same
from registry.outputs import ImageOutput, ProcedureOutput


@dataclass
class DemoOutput(ProcedureOutput):
    texts: list[str] | None = None
    scores: list[float] | None = None
    nfe: int | None = None


@given(st.one_of(st.none(), st.lists(st.text(max_size=3), max_size=3)), st.one_of(st.none(), st.lists(st.floats(0, 1), max_size=3)),
       st.one_of(st.none(), st.integers(0, 10)))
def test_attribute_key_and_tuple_access_agree(texts, scores, nfe) -> None:
    """Invariant: every non-None field is a key with the attribute's value, in declaration order,
    and ``to_tuple()`` / integer indexing list exactly those values; None fields are not keys."""
    out = DemoOutput(texts=texts, scores=scores, nfe=nfe)
    present = [(k, v) for k, v in (("texts", texts), ("scores", scores), ("nfe", nfe)) if v is not None]
    assert list(out.keys()) == [k for k, _ in present]
    assert out.to_tuple() == tuple(v for _, v in present)
    for i, (k, v) in enumerate(present):
        assert out[k] == getattr(out, k) == out[i] == v
    assert pickle.loads(pickle.dumps(out)) == out


def test_setting_a_field_updates_both_views_and_mapping_edits_are_refused() -> None:
    out = DemoOutput(texts=["a"])
    out.nfe = 3
    assert out["nfe"] == 3 and out.to_tuple() == (["a"], 3)
    out.nfe = None
    assert "nfe" not in out and out.nfe is None
    for bad in (lambda: out.pop("texts"), lambda: out.update(texts=[]), lambda: out.setdefault("x", 1)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError, match="must be a @dataclass"):
        type("NotADataclass", (ProcedureOutput,), {})()


def test_image_output_views() -> None:
    x = torch.linspace(-1.5, 1.5, 2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    out = ImageOutput(samples=x)
    imgs = out.images
    assert imgs.shape == (2, 4, 5, 3) and imgs.dtype == np.float32 and imgs.min() == 0 and imgs.max() == 1
    np.testing.assert_allclose(imgs[1, 2, 3], ((x[1, :, 2, 3] / 2 + 0.5).clamp(0, 1)).numpy())
    pil = out.pil_images
    assert len(pil) == 2 and pil[0].size == (5, 4) and pil[0].mode == "RGB"
    assert ImageOutput(samples=x[:, :1]).pil_images[0].mode == "L"
    assert_same(ImageOutput(samples=x), ImageOutput(samples=x.clone()))  # conformance compares outputs as mappings


def test_importing_outputs_is_torch_free() -> None:
    code = "import sys, registry.outputs; print('torch' in sys.modules, 'PIL' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split() == ["False", "False"]
