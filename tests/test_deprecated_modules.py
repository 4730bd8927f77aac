"""The three "output" modules were named apart (issue 36 item 5): ``registry.outputs`` -> ``registry.results``,
``zoo.common.output`` -> ``zoo.common.out_files``, ``zoo.common.bench_output`` -> ``zoo.common.quick_flag``. Each old
module stays one release as a shim: importing it warns (DeprecationWarning) and its names are the new module's."""
from __future__ import annotations

import importlib
import sys

import pytest

MOVED = [("registry.outputs", "registry.results", ["ProcedureOutput", "ImageOutput", "per_call", "summarize", "is_per_call"]),
         ("zoo.common.output", "zoo.common.out_files", ["OutPath", "JsonPath", "output_path", "pyplot", "save_figure",
                                                        "write_json"]),
         ("zoo.common.bench_output", "zoo.common.quick_flag", ["parse_with_quick"])]


@pytest.mark.parametrize(("old", "new", "names"), MOVED)
def test_the_old_module_warns_on_import_and_re_exports_the_same_objects(
        old: str, new: str, names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated, import {new}"):
        shim = importlib.import_module(old)
    for name in names:
        assert getattr(shim, name) is getattr(fresh, name), name
    public = [n for n in vars(fresh) if not n.startswith("_") and getattr(getattr(fresh, n), "__module__", new) == new]
    assert public and all(getattr(shim, n) is getattr(fresh, n) for n in public)


def test_nothing_in_the_engine_or_the_zoo_imports_an_old_module() -> None:
    import subprocess

    code = ("import warnings; warnings.filterwarnings('error', '.* is deprecated, import ', DeprecationWarning); import sys, zoo, registry.sampling, "
            "registry.contract, zoo.common.scheduler_samplers, zoo.common.pfgmpp; "
            "print(sorted(m for m in sys.modules if m in ('registry.outputs', 'zoo.common.output', 'zoo.common.bench_output')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
