"""One validation path: every implementation package keeps the models its specs fill in a torch-free
``params.py`` (:mod:`registry.declare`) and its code uses those very classes, so ``zoo validate`` checks a spec
with pydantic and the build's own model, without importing torch or the method's code."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = ["zoo.common"] + sorted(f"zoo.methods.{p.name}" for p in (ROOT / "zoo" / "methods").iterdir()
                                   if (p / "__init__.py").is_file())
HEAVY = ("torch", "numpy", "scipy", "sklearn", "diffusers", "transformers", "timm", "matplotlib")


def imported_by(package: str) -> dict[str, list[str]]:
    """Import ``<package>.params`` in a fresh interpreter: the heavy libraries and the package's non-params modules
    it imported."""
    code = textwrap.dedent(f"""
        import importlib, json, sys
        importlib.import_module({package + '.params'!r})
        heavy = [m for m in {HEAVY!r} if m in sys.modules]
        code = sorted(m for m in sys.modules if m.startswith("zoo.") and m.count(".") >= 2
                      and not m.endswith(".params") and m not in {sorted(PACKAGES)!r}
                      and m not in ("zoo.common.lazy", "zoo.common.out_files", "zoo.common.deprecation")
                      and getattr(sys.modules[m], "__file__", None))  # not the alias placeholders of install_aliases
        print(json.dumps({{"heavy": heavy, "code": code}}))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("package", PACKAGES)
def test_params_module_imports_no_torch_and_no_method_code(package: str) -> None:
    assert (ROOT / Path(*package.split(".")) / "params.py").is_file(), f"{package} has no params.py"
    got = imported_by(package)
    assert got["heavy"] == [], f"{package}.params imports {got['heavy']}"
    assert got["code"] == [], f"{package}.params imports method code: {got['code']}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_registered_callable_uses_the_models_its_params_module_declares(package: str) -> None:
    """Every public ``module:attr`` of the package reaching a registered object is declared, for each kind it is
    registered as, with the very model classes the engine will use; and every declaration is reached."""
    from registry import declare

    problems, used = [], set()
    for target, obj, kinds in declare.registered_targets(package):
        found = declare.find(target)
        if found is None:
            problems.append(f"{target}: no params module")
            continue
        module, _, attr = target.partition(":")
        used.add(attr)
        used.add(f"{module.removeprefix(package).lstrip('.')}:{attr}")
        for kind in kinds:
            why = declare.disagreement(target, found, obj, kind)
            if why:
                problems.append(why)
    table = __import__(f"{package}.params", fromlist=["TARGETS"]).TARGETS
    dead = sorted(set(table) - used)
    assert not problems, "\n".join(problems)
    assert not dead, f"{package}.params declares targets nothing registers: {dead}"
