"""The resolver is the only door from spec strings to code: allowlist before and after import."""
from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.errors import ResolveError
from registry.resolve import allowed_packages, library_class, resolve


@pytest.mark.parametrize(
    "target",
    ["os:system", "builtins:eval", "subprocess:run", "logging.os:system", "importlib:import_module",
     "zoo_demo_plugin:torch.load", "zoo_demo_plugin:torch", "pickle:loads"],
)
def test_dangerous_targets_are_refused(target: str) -> None:
    with pytest.raises(ResolveError):
        resolve(target, kind="factory")


def test_refused_module_is_never_imported() -> None:
    sys.modules.pop("this_is_not_allowed_zz", None)
    with pytest.raises(ResolveError, match="not in the allowlist"):
        resolve("this_is_not_allowed_zz:thing", kind="factory")
    assert "this_is_not_allowed_zz" not in sys.modules


def test_allowed_target_resolves() -> None:
    assert "zoo" in allowed_packages()
    assert resolve("zoo_demo_plugin:GaussianSampler", kind="procedure").__name__ == "GaussianSampler"


def test_module_is_not_a_callable() -> None:
    with pytest.raises(ResolveError):
        resolve("zoo_demo_plugin:torch.nn", kind="factory")


@given(st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,2}:[a-z_]{1,8}", fullmatch=True))
def test_random_targets_outside_allowlist_never_resolve(target: str) -> None:
    """Invariant: any target whose top package is not allowed raises ResolveError, never imports."""
    top = target.split(":")[0].split(".")[0]
    if top in allowed_packages():
        return
    with pytest.raises(ResolveError):
        resolve(target, kind="factory")


def test_library_class_only_returns_library_classes() -> None:
    assert library_class("transformers", "AutoConfig").__name__ == "AutoConfig"
    with pytest.raises(ResolveError):
        library_class("transformers", "os")
    with pytest.raises(ResolveError):
        library_class("pickle", "Unpickler")
    with pytest.raises(ResolveError):
        library_class("transformers", "pipeline")  # a function, not a class
