"""The hook context (`registry.context.Context`): what every hook the engine calls reaches, and the spec
features it reads — files a spec declares (`weights:`, `{file:, sha256:}` transform_config values), roles
another spec declares (`from_spec`), invariants that take `ctx`."""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from test_check_failure_report import write_plugin

from registry.errors import BuildError, SpecErrors, ZooError

PLUGIN = '''
from pathlib import Path

import torch
from registry.contract import Procedure, ProcedureParams, factory, invariant, transform

SEEN = {}


class Echo(Procedure):
    class Params(ProcedureParams):
        k: int = 1

    def __call__(self, *, seed=0):
        SEEN["ctx"] = self.ctx
        return seed * self.params.k


@factory
def build_lin(n: int = 2) -> torch.nn.Linear:
    return torch.nn.Linear(n, n)


@transform
def add_file_bias(model, packed, scale: float = 1.0):
    """Adds the bytes' count of the packed file to the bias (so the test sees which file it got)."""
    SEEN["packed"] = packed
    assert isinstance(packed, Path) and packed.is_absolute(), packed
    with torch.no_grad():
        model.bias.add_(scale * len(packed.read_bytes()))
    return model


@invariant("needs-ctx")
def needs_ctx(ctx):
    SEEN["inv"] = ctx
    assert ctx.models("toy")["lin"].bias.shape == (2,)


@invariant("no-args")
def no_args():
    SEEN["noargs"] = True
'''


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _weights(folder: Path) -> tuple[str, str]:
    """A shipped nn.Linear(2, 2) checkpoint and a packed file beside it: their sha256s."""
    import torch
    from safetensors.torch import save_file

    (folder / "weights").mkdir(exist_ok=True)
    torch.manual_seed(0)
    save_file(torch.nn.Linear(2, 2).state_dict(), str(folder / "weights" / "lin.safetensors"))
    (folder / "weights" / "packed.bin").write_bytes(b"0123456789")
    return _digest(folder / "weights" / "lin.safetensors"), _digest(folder / "weights" / "packed.bin")


def _spec(pkg: str, w: str, p: str, extra: str = "", name: str = "ctx-demo") -> str:
    return textwrap.dedent(f"""\
        name: {name}
        title: ctx demo
        task: demo
        implementation: {pkg}
        models:
          lin:
            kind: linear
            variants:
              toy: {{source: zoo, factory: "{pkg}:build_lin", weights: weights/lin.safetensors, sha256: {w}}}
          lin-packed:
            kind: linear
            variants:
              toy: {{source: role, from_role: lin, transform: "{pkg}:add_file_bias",
                     transform_config: {{packed: {{file: weights/packed.bin, sha256: {p}}}, scale: 2.0}}}}
        samplers: {{echo: {{target: "{pkg}:Echo"}}}}
        default: echo
        variants: [toy]
        hardware: {{toy: {{accelerator: cpu}}}}
        invariants: [needs-ctx, no-args]
        """) + extra


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str, object]:
    w, p = _weights(tmp_path)
    spec = write_plugin(tmp_path, monkeypatch, "zoo_ctx_demo", PLUGIN, _spec("zoo_ctx_demo", w, p))
    import zoo_ctx_demo  # type: ignore[import-not-found]

    return spec, w, p, zoo_ctx_demo


def test_pipeline_procedures_and_metric_checks_share_one_context(demo) -> None:
    import zoo

    spec, _, _, mod = demo
    pipe = zoo.load(str(spec))
    ctx = pipe.ctx
    assert ctx is not None and ctx.spec is pipe.spec and ctx.file == spec.resolve()
    assert pipe.procedures["echo"].ctx is ctx
    assert pipe(seed=3) == 3 and mod.SEEN["ctx"] is ctx
    assert pipe(seed=3, k=5) == 15 and mod.SEEN["ctx"] is ctx  # a per-call override's clone keeps the context
    assert ctx.pipeline() is pipe and ctx.pipeline("toy") is pipe  # built once per (variant, params)
    other = ctx.pipeline("toy", k=2)
    assert other is not pipe and other is ctx.pipeline("toy", k=2) and other.models["lin"] is pipe.models["lin"]
    assert ctx.models("toy")["lin"] is pipe.models["lin"]
    assert ctx.out_dir is None
    with pytest.raises(ZooError, match="no output folder"):
        ctx.path("x.txt")


def test_file_valued_transform_config_is_resolved_and_verified(demo, tmp_path: Path) -> None:
    import torch

    import zoo

    spec, _, p, mod = demo
    pipe = zoo.load(str(spec))
    assert mod.SEEN["packed"] == (tmp_path / "weights" / "packed.bin").resolve()
    assert torch.allclose(pipe.models["lin-packed"].bias, pipe.models["lin"].bias + 20.0)  # 2.0 * 10 bytes
    # the same spec with other bytes in the file: refused before the transform runs, naming the field
    (tmp_path / "weights" / "packed.bin").write_bytes(b"tampered!!")
    mod.SEEN.pop("packed")
    from registry.context import build_pipeline
    from registry.loader import load_spec_file

    with pytest.raises(BuildError) as exc:
        build_pipeline(load_spec_file(spec), file=spec, use_cache=False)
    assert "sha256 mismatch for packed.bin" in str(exc.value)
    assert "models.lin-packed.variants.toy.transform_config.packed" in str(exc.value)
    assert "packed" not in mod.SEEN


def test_file_entries_are_confined_and_well_formed(demo, tmp_path: Path) -> None:
    from registry.loader import load_spec_file

    spec, w, p, _ = demo
    outside = tmp_path.parent / f"outside-{tmp_path.name}.bin"
    outside.write_bytes(b"secret")
    bad = tmp_path / "bad.yaml"
    bad.write_text(_spec("zoo_ctx_demo", w, p).replace("file: weights/packed.bin", f"file: ../{outside.name}"))
    with pytest.raises(SpecErrors) as exc:
        load_spec_file(bad)
    assert "transform_config.packed" in str(exc.value) and "'..'" in str(exc.value)
    bad.write_text(_spec("zoo_ctx_demo", w, p).replace(f"file: weights/packed.bin, sha256: {p}", "file: weights/packed.bin"))
    with pytest.raises(SpecErrors) as exc:
        load_spec_file(bad)
    assert "transform_config.packed.sha256" in str(exc.value) and "bad.yaml:" in str(exc.value)
    link = tmp_path / "weights" / "link.bin"
    link.symlink_to(outside)
    bad.write_text(_spec("zoo_ctx_demo", w, p).replace("file: weights/packed.bin", "file: weights/link.bin"))
    with pytest.raises(SpecErrors) as exc:
        load_spec_file(bad)
    assert "outside the spec's folder tree" in str(exc.value)


def test_spec_file_takes_the_sha256_from_the_spec_never_from_the_caller(demo, tmp_path: Path) -> None:
    import zoo

    spec, w, p, _ = demo
    ctx = zoo.load(str(spec)).ctx
    assert ctx.spec_file("weights/packed.bin") == (tmp_path / "weights" / "packed.bin").resolve()
    assert ctx.spec_file("./weights//lin.safetensors") == (tmp_path / "weights" / "lin.safetensors").resolve()
    (tmp_path / "weights" / "extra.bin").write_bytes(b"x")
    with pytest.raises(BuildError, match="not a file ctx-demo declares"):
        ctx.spec_file("weights/extra.bin")
    assert ctx.spec_file("weights/extra.bin", _digest(tmp_path / "weights" / "extra.bin")).name == "extra.bin"
    with pytest.raises(BuildError, match="differs from the spec's"):
        ctx.spec_file("weights/packed.bin", "0" * 64)
    with pytest.raises(BuildError, match="outside the spec's folder"):
        ctx.spec_file("../outside.bin", "0" * 64)
    (tmp_path / "weights" / "packed.bin").write_bytes(b"tampered!!")
    with pytest.raises(BuildError, match="sha256 mismatch for packed.bin"):
        ctx.spec_file("weights/packed.bin")


def test_invariants_get_the_context_when_they_take_one(demo) -> None:
    import zoo
    from registry.conformance import checks_for, run_check
    from registry.contract import invariant

    spec, _, _, mod = demo
    entry = zoo.entry(str(spec))
    results = {c.id: run_check(c) for c in checks_for(entry) if "invariant" in c.id or "file[" in c.id or "weights[" in c.id}
    assert {k: v[0] for k, v in results.items()} == {
        "ctx-demo::weights[lin.toy]": "PASS", "ctx-demo::file[lin-packed.toy.packed]": "PASS",
        "ctx-demo::invariant[needs-ctx]": "PASS", "ctx-demo::invariant[no-args]": "PASS"}
    assert mod.SEEN["inv"].spec.name == "ctx-demo" and mod.SEEN["noargs"] is True
    with pytest.raises(TypeError, match="takes none or one"):
        invariant("two-args")(lambda ctx, other: None)


# ----------------------------------------------------------------------------- from_spec: one declaration, shared
def test_a_role_other_specs_name_is_built_once_from_its_own_declaration(demo, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two specs name ctx-demo's `lin`: each gets the one built model (share: true), loaded from ctx-demo's folder
    and sha256; a missing role, spec or cycle is one line."""
    import zoo
    from registry.context import build_pipeline
    from registry.loader import load_spec_file

    spec, _, _, _ = demo
    monkeypatch.setenv("ZOO_SPECS_PATH", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def user(name: str, role: str = "lin", share: str = "true") -> Path:
        f = elsewhere / f"{name}.yaml"
        f.write_text(textwrap.dedent(f"""\
            name: {name}
            title: user
            task: demo
            implementation: zoo_ctx_demo
            models:
              shared: {{kind: linear, variants: {{toy: {{source: role, from_spec: ctx-demo, from_role: {role}, share: {share}}}}}}}
            samplers: {{echo: {{target: "zoo_ctx_demo:Echo"}}}}
            default: echo
            variants: [toy]
            hardware: {{toy: {{accelerator: cpu}}}}
            """))
        return f

    a, b = zoo.load(str(user("user-a"))), zoo.load(str(user("user-b")))
    base = zoo.load(str(spec))
    assert a.models["shared"] is b.models["shared"] is base.models["lin"]
    copied = build_pipeline(load_spec_file(user("user-c", share="false")), file=elsewhere / "user-c.yaml")
    assert copied.models["shared"] is not base.models["lin"]
    assert bool((copied.models["shared"].weight == base.models["lin"].weight).all())
    with pytest.raises(BuildError, match="has no role 'nope' with a toy variant") as exc:
        zoo.load(str(user("user-d", role="nope")))
    assert "user-d.yaml" in str(exc.value) and "from_role" in str(exc.value)
    missing = user("user-e").read_text().replace("from_spec: ctx-demo", "from_spec: no-such-spec")
    (elsewhere / "user-e.yaml").write_text(missing)
    with pytest.raises(BuildError, match="no spec named 'no-such-spec'"):
        zoo.load(str(elsewhere / "user-e.yaml"))
    from zoo.cli import main

    assert main(["validate", str(elsewhere / "user-e.yaml")]) == 2
    cyc = tmp_path / "cyc-a.yaml"
    cyc.write_text(user("cyc-a").read_text().replace("from_spec: ctx-demo", "from_spec: cyc-a"))
    with pytest.raises(BuildError, match="from_spec cycle: cyc-a -> cyc-a"):
        zoo.load(str(cyc))
    (tmp_path / "broken-dep.yaml").write_text("name: broken-dep\ntitle: t\ntask: demo\nimplementation: zoo_ctx_demo\nbogus_field: 1\n")
    (elsewhere / "user-f.yaml").write_text(user("user-f").read_text().replace("from_spec: ctx-demo", "from_spec: broken-dep"))
    with pytest.raises(BuildError, match=r"spec 'broken-dep' \(.*broken-dep.yaml\) does not validate: .*required field is missing"):
        zoo.load(str(elsewhere / "user-f.yaml"))


def test_the_contract_context_is_the_interface_the_engine_context_implements(demo) -> None:
    """``registry.contract.Context`` (method code's type hint) is a Protocol every engine context satisfies; an object
    missing one of the hook-facing members does not."""
    from registry.context import Context as EngineContext
    from registry.contract import Context
    from registry.loader import load_spec_file

    spec_path = demo[0]
    ctx = EngineContext(load_spec_file(spec_path), spec_path)
    assert isinstance(ctx, Context)
    members = [m for m in vars(Context) if not m.startswith("_")] + list(Context.__annotations__)
    assert {"pipeline", "models", "spec_file", "report", "figure", "cache_dir", "seed", "quick", "out_dir"} <= set(members)
    for m in members:  # each member the Protocol names is real on the engine's context
        assert hasattr(ctx, m), m

    class Partial:
        spec = file = variant = out_dir = None
        seed, quick = 0, False

        def pipeline(self, variant=None, **params): ...

    assert not isinstance(Partial(), Context)
