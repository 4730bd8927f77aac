"""The public names of every method package are a committed list, so a name that disappears
(moved without an alias, renamed, deleted) fails here until its list is edited on purpose.

A package's public names (the ast of its sources, and :func:`registry.declare.registered_targets`):
* every ``module:name`` in a module's ``__all__``;
* every ``module:attr`` spelling that reaches a registered object (what a spec's ``target:`` / ``factory:`` /
  ``check:`` / ``bench:`` may name; found by importing the package);
* every deprecated alias the package declares in ``__deprecated_aliases__`` (:mod:`zoo.common.deprecation`),
  listed as ``old -> new``.

The lists live in ``tests/methods/public_names/<package>.txt`` (one name per line, sorted). A public name that
moves keeps a deprecated alias for one release; removing a name (or, after that release, an alias) means deleting
its line in the same change.
"""
from __future__ import annotations

import ast
import shutil
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "zoo" / "methods"
LISTS = Path(__file__).resolve().parent / "public_names"
PACKAGES = sorted(p.name for p in METHODS.iterdir() if (p / "__init__.py").is_file())


def _literal(tree: ast.Module, name: str) -> object:
    """The module-level literal assigned to ``name`` (``+=`` of lists too), or None."""
    value: object = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name and node.value:
            value = ast.literal_eval(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = list(value or []) + list(ast.literal_eval(node.value))
    return value


def registered(module_prefix: str) -> set[str]:
    """Every ``module:attr`` of the package reaching a registered object (imports the package)."""
    from registry.declare import registered_targets

    return {target for target, _, _ in registered_targets(module_prefix)}


def public_names(pkg_dir: Path, module_prefix: str, targets: set[str] | None = None) -> set[str]:
    """The public names of the method package in ``pkg_dir`` (imported as ``module_prefix``): its sources read
    statically, plus ``targets`` (default: :func:`registered` of ``module_prefix``)."""
    names: set[str] = set()
    for f in sorted(pkg_dir.rglob("*.py")):
        rel = f.relative_to(pkg_dir).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = ".".join([module_prefix, *parts])
        tree = ast.parse(f.read_text(), str(f))
        for n in _literal(tree, "__all__") or []:
            names.add(f"{module}:{n}")
        if f.name == "__init__.py" and not parts:
            for sub, aliases in (_literal(tree, "__deprecated_aliases__") or {}).items():
                for attr, new in aliases.items():
                    names.add(f"{module_prefix}{'.' + sub if sub else ''}:{attr} -> {new}")
    return names | (registered(module_prefix) if targets is None else targets)


def listed(pkg: str) -> set[str]:
    path = LISTS / f"{pkg}.txt"
    return {ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")} if path.is_file() else set()


def drift(current: set[str], committed: set[str], pkg: str) -> list[str]:
    """One line per difference between a package's public names and its committed list."""
    out = [f"removed without an alias: {n} (keep a deprecated alias for one release, see zoo/common/deprecation.py, or "
           f"delete its line from tests/methods/public_names/{pkg}.txt on purpose)" for n in sorted(committed - current)]
    out += [f"new public name not in tests/methods/public_names/{pkg}.txt: {n}" for n in sorted(current - committed)]
    return out


@pytest.mark.parametrize("pkg", PACKAGES)
def test_public_names_match_the_committed_list(pkg):
    problems = drift(public_names(METHODS / pkg, f"zoo.methods.{pkg}"), listed(pkg), pkg)
    assert not problems, "\n".join(problems)


def test_every_list_belongs_to_a_package():
    assert sorted(p.stem for p in LISTS.glob("*.txt")) == PACKAGES


def test_dropping_an_alias_or_a_name_is_caught(tmp_path):
    """Negative control: today's f_dpmsolver with its alias declaration deleted (what the move to zoo.common.digits did:
    no alias) and with one ``__all__`` entry dropped, read against the committed list."""
    pkg = tmp_path / "f_dpmsolver"
    shutil.copytree(METHODS / "f_dpmsolver", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    init = pkg / "__init__.py"
    text = init.read_text().replace(', "fdpm_sample"]', "]")
    start = text.index("__deprecated_aliases__ = {")
    init.write_text(text[:start] + text[text.index("__getattr__"):].replace("__deprecated_aliases__", "{}"))
    problems = drift(public_names(pkg, "zoo.methods.f_dpmsolver", registered("zoo.methods.f_dpmsolver")), listed("f_dpmsolver"),
                     "f_dpmsolver")
    removed = [p for p in problems if p.startswith("removed")]
    assert any("zoo.methods.f_dpmsolver.toy:build_digits_unet -> zoo.common.digits:build_digits_unet" in p for p in removed)
    assert any(p.startswith("removed without an alias: zoo.methods.f_dpmsolver:fdpm_sample ") for p in removed)
    assert len(removed) == 7, removed


def _aliases() -> list[tuple[str, str, str]]:
    out = []
    for pkg in PACKAGES:
        tree = ast.parse((METHODS / pkg / "__init__.py").read_text())
        for sub, aliases in (_literal(tree, "__deprecated_aliases__") or {}).items():
            out += [(f"zoo.methods.{pkg}{'.' + sub if sub else ''}", attr, new) for attr, new in aliases.items()]
    return out


@pytest.mark.parametrize("module, attr, new", _aliases(), ids=lambda v: str(v))
def test_a_deprecated_alias_warns_and_is_the_moved_object(module, attr, new):
    import importlib

    from zoo.common.deprecation import resolve_alias

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{attr} moved to {new.replace(':', '.')}"):
        obj = getattr(mod, attr)
    assert obj is resolve_alias(new)


def test_the_removed_digits_unet_path_works_again(tmp_path):
    """A moved path stays importable: ``from zoo.methods.f_dpmsolver.toy import build_digits_unet`` and a third-party
    spec's ``factory: "zoo.methods.f_dpmsolver.toy:build_digits_unet"`` (``zoo validate`` statically, then built and
    sampled) work, with a DeprecationWarning naming the new path; on main both failed (ImportError / not registered)."""
    from registry.resolve import resolve
    from zoo.common.digits import build_digits_unet

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from zoo.methods.f_dpmsolver.toy import build_digits_unet as old  # noqa: PLC0415

        assert old is build_digits_unet
        assert resolve("zoo.methods.f_dpmsolver.toy:build_digits_unet", kind="factory") is build_digits_unet
    assert [str(w.message).split(";")[0] for w in caught if w.category is DeprecationWarning] == [
        "zoo.methods.f_dpmsolver.toy.build_digits_unet moved to zoo.common.digits.build_digits_unet"] * 2

    spec = tmp_path / "old-unet.yaml"
    spec.write_text(
        "name: old-path-unet\ntitle: a third-party spec naming the old factory path\ntask: unconditional-sampling\n"
        "implementation: zoo.methods.f_dpmsolver\nmodels:\n  denoiser:\n    kind: vp-diffusion-model\n    variants:\n"
        '      toy: {source: zoo, factory: "zoo.methods.f_dpmsolver.toy:build_digits_unet", config: {block_out_channels: [8, 16], norm_num_groups: 4}}\n'
        'samplers: {f-ddim: {target: "zoo.methods.f_dpmsolver:FDPMSolverSampler", params: {num_inference_steps: 2}}}\n'
        "default: f-ddim\nvariants: [toy]\nhardware: {toy: {accelerator: cpu}}\n")
    from registry.context import build_pipeline
    from registry.lint import lint
    from registry.loader import load_spec_file

    s = load_spec_file(spec)
    assert lint(s, spec, resolve=True) == []  # static: the alias is followed to zoo.common's params module
    with pytest.warns(DeprecationWarning, match="moved to zoo.common.digits.build_digits_unet"):
        pipe = build_pipeline(s, file=spec, use_cache=False)
    assert tuple(pipe(seed=0, batch_size=2).samples.shape) == (2, 1, 8, 8)
