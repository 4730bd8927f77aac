"""Every size a call accepts is bounded by the procedure's inputs model, the same for
Python and ``zoo run``, with one ``ParamError`` naming the limit and how to raise it -- before the call
allocates anything (``pipe(seed=0, batch_size=10**9)`` on f-dpmsolver grew to 20 GB; ``pipe(n=10**9)``
on ramac asked for 168 GB). Sizes here are just above the limits, and a dispatch mode that fails on
any tensor operation proves the refusal comes first."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from registry import limits
from registry.contract import Procedure, ProcedureParams, Sequences
from registry.errors import ParamError
from registry.inputs import unbounded_inputs

ROWS = limits.LIMITS["rows"].default


class NoTensorOps(TorchDispatchMode):
    """Fails the test on the first tensor operation (allocation included) inside the block."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise AssertionError(f"a tensor operation ran before the size was refused: {func}")


@pytest.fixture(scope="module")
def fdpm() -> Any:
    return zoo.load("f-dpmsolver", variant="toy")


@pytest.fixture(scope="module")
def ramac() -> Any:
    return zoo.load("ramac", variant="toy")


def _refused(call: Any, name: str, kind: str = "rows") -> str:
    with NoTensorOps(), pytest.raises(ParamError) as exc:
        call()
    msg = str(exc.value)
    lim = limits.LIMITS[kind]
    assert msg.startswith(f"input {name} of "), msg
    assert f"above the per-call limit of {limits.limit(kind)} {lim.unit}" in msg and lim.env in msg, msg
    assert f"registry.limits.raised({kind}=N)" in msg and "\n" not in msg
    return msg


def test_f_dpmsolver_batch_size_above_the_limit_is_refused_before_any_allocation(fdpm: Any) -> None:
    _refused(lambda: fdpm(seed=0, batch_size=ROWS + 1), "batch_size")
    _refused(lambda: fdpm.procedures["f-ddim-edm"](seed=0, batch_size=ROWS + 1), "batch_size")
    # the same bound for the Python call and the CLI option (--n): one limit, one message
    from zoo.common.scheduler_samplers import SamplerCli

    with pytest.raises(Exception, match=f"above the per-call limit of {ROWS} rows"):
        SamplerCli(n=str(ROWS + 1))


def test_ramac_n_above_the_limit_is_refused_before_any_allocation(ramac: Any) -> None:
    _refused(lambda: ramac(seed=0, n=ROWS + 1), "n")


def test_a_tensor_input_is_bounded_by_its_rows(fdpm: Any) -> None:
    """A caller-made tensor is measured too (its first dimension), so the limit cannot be bypassed with
    ``noise=`` (meta tensors: nothing is allocated, only the shape is read)."""
    noise = torch.empty((ROWS + 1, 2), device="meta")
    _refused(lambda: fdpm(seed=0, noise=noise), "noise")


def test_a_list_of_seeds_is_bounded_by_its_rows(fdpm: Any) -> None:
    """A ``per_row_seeds`` sampler takes one seed per row (``zoo sample``): the list is a row count like
    ``batch_size`` (``registry.limits.Seeds``), and each entry is a seed in ``[0, 2**63 - 1]``."""
    seeds = list(range(ROWS + 1))
    _refused(lambda: fdpm(seed=seeds, batch_size=ROWS + 1), "seed")
    _refused(lambda: fdpm.procedures["f-ddim"](seed=seeds, batch_size=2), "seed")
    with NoTensorOps(), pytest.raises(ParamError, match=r"^input seed\[1\] of FDPMSolverSampler: expected an integer in \[0, 2\*\*63 - 1\], got -2$"):
        fdpm.procedures["f-ddim"](seed=[1, -2], batch_size=2)
    with NoTensorOps(), pytest.raises(ParamError, match=r"^input seed of FDPMSolverSampler: item 1: expected an integer, got a boolean"):
        fdpm.procedures["f-ddim"](seed=[1, True], batch_size=2)
    assert fdpm(seed=[3, 4], batch_size=2).samples.shape == (2, 2)  # control: a short list runs


def test_zoo_sample_refuses_a_batch_above_the_limit_before_writing_anything(tmp_path: Path) -> None:
    """``zoo sample``'s calls are per-call calls like any other: a ``batch_size`` above the rows limit is one line
    naming it before the folder or its manifest is written (the run could otherwise stop after the manifest)."""
    out = tmp_path / "rows"
    with limits.raised(rows=8):
        with pytest.raises(ParamError, match=r"^batch_size: 10 rows per call: input seed of FDPMSolverSampler: count 10 is "
                                             r"above the per-call limit of 8 rows \(raise it deliberately with ZOO_MAX_ROWS=N"):
            zoo.sample("f-dpmsolver", 20, out, variant="toy", batch_size=10, progress=False)
        assert not out.exists()
        zoo.sample("f-dpmsolver", 20, out, variant="toy", batch_size=8, progress=False)  # control: at the limit it runs
    assert zoo.read_samples(out).samples.shape == (20, 2)


def test_limits_are_raised_deliberately_by_env_or_context(fdpm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within ``raised(rows=...)`` or with ``ZOO_MAX_ROWS`` the same size passes validation (the meta tensor
    then fails inside the method, which shows validation let it through); a bad variable is one line."""
    noise = torch.empty((ROWS + 1, 2), device="meta")
    with limits.raised(rows=ROWS + 1):
        with pytest.raises(Exception) as exc:
            fdpm(seed=0, noise=noise)
        assert not isinstance(exc.value, ParamError), exc.value
    _refused(lambda: fdpm(seed=0, noise=noise), "noise")  # the block's limit ended with it
    monkeypatch.setenv("ZOO_MAX_ROWS", str(ROWS + 1))
    with pytest.raises(Exception) as exc:
        fdpm(seed=0, noise=noise)
    assert not isinstance(exc.value, ParamError), exc.value
    monkeypatch.setenv("ZOO_MAX_ROWS", "lots")
    with pytest.raises(ParamError, match=r"^ZOO_MAX_ROWS: expected a positive integer, got 'lots'$"):
        fdpm(seed=0, batch_size=2)
    monkeypatch.setenv("ZOO_MAX_ROWS", "8")  # lowering works the same way
    _refused(lambda: fdpm(seed=0, batch_size=9), "batch_size")


def test_sequence_inputs_are_bounded_by_count_and_length() -> None:
    """Prompts, texts and token-id lists: the number of rows and the longest row are both limited."""
    class Echo(Procedure):
        class Params(ProcedureParams):
            pass

        def __call__(self, prompt: Sequences = None, *, seed: int = 0) -> int:
            return 0 if prompt is None else 1

    echo = Echo({}, Echo.Params())
    with limits.raised(rows=3, length=5):
        assert echo(["abcde"] * 3) == 1 and echo("abcde") == 1 and echo(torch.zeros(3, 5)) == 1
        with pytest.raises(ParamError, match=r"^input prompt of Echo: count 4 is above the per-call limit of 3 rows"):
            echo(["a"] * 4)
        with pytest.raises(ParamError, match=r"^input prompt of Echo: length 6 is above the per-call limit of 5 tokens"):
            echo(["abcde", "abcdef"])
        with pytest.raises(ParamError, match="length 6 is above"):
            echo(torch.zeros(2, 6))
        with pytest.raises(ParamError, match="length 6 is above"):
            echo([[1, 2, 3, 4, 5, 6]])  # one token-id row


# ----------------------------------------------------------------------------- the conformance rule
def _planted(code: str) -> type:
    ns: dict[str, Any] = {}
    exec(compile(textwrap.dedent("""
        from typing import Annotated, Any
        import torch
        from pydantic import Field
        from registry.contract import CliInputs, Procedure, ProcedureParams, Rows, Bound, Seeds
    """) + textwrap.dedent(code), "<planted>", "exec", dont_inherit=True), ns)  # no PEP 563 from this file
    return ns["P"]


@pytest.mark.parametrize("code, where", [
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, batch_size: int = 4): ...", "__call__ input batch_size"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, n: int | None = None): ...", "__call__ input n"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, noise: torch.Tensor | None = None): ...", "__call__ input noise"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, texts: list[str] | None = None): ...", "__call__ input texts"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, rows: Annotated[list[list[int]], Field(max_length=4)] = None): ...",
     "__call__ input rows[item]"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, prompt: Any = None): ...", "__call__ input prompt"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int = 0, **inputs: Any): ...", "__call__ **inputs"),
    ("class P(Procedure):\n    def __call__(self, *, seed: int | list[int] = 0): ...", "__call__ input seed"),
    ("class P(Procedure):\n    class Params(ProcedureParams):\n        steps: int = 10\n    def __call__(self, *, seed: int = 0): ...",
     "Params.steps"),
    ("class P(Procedure):\n    class CliInputs(CliInputs):\n        n: int = 4\n    def __call__(self, *, seed: int = 0): ...",
     "CliInputs.n"),
])
def test_an_unbounded_size_is_named_by_the_bounded_inputs_rule(code: str, where: str) -> None:
    """Negative controls of the ``bounded-inputs`` conformance check: each planted class forgets one bound."""
    problems = unbounded_inputs(_planted(code))
    assert any(p.startswith(where + ":") or p.startswith(where + " ") for p in problems), problems


def test_bounded_declarations_pass_the_rule() -> None:
    ok = _planted("""
        class P(Procedure):
            class Params(ProcedureParams):
                steps: int = Field(10, ge=1, le=1000)
                sizes: tuple[Annotated[int, Field(le=64)], ...] = Field((8,), max_length=4)
                scale: float = 1.0
                flag: bool = False
            class CliInputs(CliInputs):
                n: Rows = 4
                out: str | None = None
            def __call__(self, *, seed: Seeds = 0, batch_size: Rows = 4, noise: Annotated[torch.Tensor, Bound("rows")] | None = None,
                         rows: Annotated[list[list[Annotated[int, Field(le=9)]]], Bound("rows"), Bound("length", "longest")] | None = None,
                         progress: bool = False, name: str = "x"): ...
    """)
    assert unbounded_inputs(ok) == []


def test_the_conformance_check_fails_a_spec_whose_procedure_forgets_a_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end through ``zoo check``'s checks: a plugin whose sampler takes an unbounded ``n`` fails
    ``bounded-inputs`` with the input named; the same plugin with ``n: Rows`` passes."""
    from engine_ext_helpers import planted_check

    results = {}
    for pkg, ann in (("zoo_unbounded_plugin", "int"), ("zoo_bounded_plugin", "Rows")):
        code = ("from registry.contract import Procedure, Rows\n\n\nclass Draw(Procedure):\n"
                f"    def __call__(self, *, seed: int = 0, n: {ann} = 2):\n        return [seed] * n\n")
        results[pkg] = planted_check(tmp_path, monkeypatch, pkg, code, "Draw", "bounded-inputs")
    status, msg = results["zoo_unbounded_plugin"]
    assert status == "FAIL" and "__call__ input n: int has no upper bound" in msg, msg
    assert results["zoo_bounded_plugin"][0] == "PASS", results["zoo_bounded_plugin"]
