"""``registry.results.ProcedureOutput`` behaves like diffusers'
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
from registry.results import ImageOutput, ProcedureOutput


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
    code = "import sys, registry.results; print('torch' in sys.modules, 'PIL' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split() == ["False", "False"]


# --- every built-in procedure returns a typed output ------------------------------

def _builtin_specs() -> list[str]:
    import zoo

    return [n for n in zoo.list() if zoo.entry(n).path.parent.name == "specs"]


@pytest.mark.parametrize("name", _builtin_specs())
def test_every_builtin_procedure_returns_a_documented_procedure_output(name: str) -> None:
    """Invariant: each procedure of each built-in spec (toy variant where there is one), called on its
    ``example_inputs``, returns a ``ProcedureOutput`` dataclass whose keys are exactly its non-None
    fields in declaration order, with ``out.f is out["f"] is out[i]``, ``to_tuple()`` listing them,
    every field named in the class docstring, and conformance's ``assert_same`` comparing it to a copy."""
    import dataclasses

    import zoo

    spec = zoo.spec(name)
    pipe = zoo.load(name, variant="toy" if "toy" in spec.variants else None, device="cpu")
    assert pipe.procedures
    for key, proc in pipe.procedures.items():
        out = proc(seed=0, **proc.example_inputs(2))
        where = f"{name}/{key}: {type(out).__name__}"
        assert isinstance(out, ProcedureOutput) and dataclasses.is_dataclass(out), where
        fields = [f.name for f in dataclasses.fields(out)]
        present = [f for f in fields if getattr(out, f) is not None]
        assert present and list(out.keys()) == present, where
        assert len(out.to_tuple()) == len(present), where
        for i, f in enumerate(present):
            assert out[f] is getattr(out, f) is out[i] is out.to_tuple()[i], (where, f)
        doc = type(out).__doc__ or ""
        assert all(f"``{f}``" in doc for f in fields), (where, [f for f in fields if f"``{f}``" not in doc])
        copy = pickle.loads(pickle.dumps(out))
        assert type(copy) is type(out)
        assert_same(out, copy)


def test_absent_optional_fields_are_not_keys_and_callers_read_them_as_attributes() -> None:
    """An undefined Spearman correlation is ``None``: not a key (BaseOutput rule), still an attribute;
    the metric check reads the attribute and reports NaN, and the report says undefined."""
    import math

    from zoo.methods.sae_feature_death import StreamSurveyOutput, format_survey
    from zoo.methods.sae_feature_death.metrics import streams_spearman_gamma_total_death

    row = {"stream": "s", "d": 4, "gamma": 1.0, "gamma_raw": 1.0, "effective_rank": 2.0, "dead_relu": 0.0,
           "dead_topk": 0.0, "dead_total": 0.0, "pred_relu": 0.0, "pred_total": 0.0}
    out = StreamSurveyOutput(rows=[row], n_tokens=8, config={"n_features": 8, "k": 2, "preprocessings": []})
    assert "spearman_total" not in out and out.spearman_total is None and out.to_tuple() == ([row], 8, out.config)

    class Proc:
        def __call__(self, seed: int = 0) -> StreamSurveyOutput:
            return out

    class Pipe:
        procedures = {"stream-survey": Proc()}

    assert math.isnan(streams_spearman_gamma_total_death(Pipe()))
    assert "total undefined (constant), ReLU undefined (constant)" in format_survey(out)
    defined = StreamSurveyOutput(rows=[row], n_tokens=8, config=out.config, spearman_total=0.5, spearman_relu=0.25)
    assert defined["spearman_total"] == 0.5 and defined[3:] == (0.5, 0.25)
    Pipe.procedures = {"stream-survey": lambda seed=0: defined}
    assert streams_spearman_gamma_total_death(Pipe()) == 0.5
