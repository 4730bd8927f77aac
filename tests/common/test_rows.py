"""zoo.common.rows: population metrics over a batch-independent sampler need one seed per row."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from registry.results import ProcedureOutput
from zoo.common.rows import concat_outputs, independent_rows, row_seed

PROMPT = "347+285="


@pytest.fixture(scope="module")
def sampler():
    """The toy masked-DLM baseline with temperature 1 (a real batch-independent, stochastic text sampler)."""
    import zoo
    from zoo.common.masked_dlm import ConfidenceDecoding

    models = zoo.load("poe-bridge", variant="toy", device="cpu").models
    return ConfidenceDecoding(models={"proposal": models["proposal"]}, params=ConfidenceDecoding.Params(temperature=1.0))


def test_one_call_gives_every_given_row_the_same_stream(sampler):
    """The defect the helper exists for: under the batch-independence contract, identical rows of ONE call
    come out identical (every row is seeded with ``seed``), although the sampler is stochastic."""
    one = sampler([PROMPT] * 6, seed=0)
    assert len(set(map(tuple, one.token_ids))) == 1
    assert len({tuple(sampler(PROMPT, seed=s).token_ids[0]) for s in range(6)}) > 1  # the sampler does vary with the seed


def test_independent_rows_draws_row_i_alone_with_row_seed_i(sampler):
    """``independent_rows``: row i equals the sampler run alone with ``row_seed(seed, i)``, identical inputs give
    different rows, and the population is reproducible from the base seed (another base seed gives others)."""
    call = lambda p, s: sampler(p, seed=s)  # noqa: E731
    out = independent_rows(call, [PROMPT] * 6, seed=0)
    assert len(out.token_ids) == len(out.texts) == len(out.stats) == 6
    assert len(set(map(tuple, out.token_ids))) > 1  # fails if the rows shared one stream (the one-call behaviour)
    for i in range(6):
        assert out.token_ids[i] == sampler(PROMPT, seed=row_seed(0, i)).token_ids[0]
    assert independent_rows(call, [PROMPT] * 6, seed=0) == out
    assert independent_rows(call, [PROMPT] * 6, seed=1).token_ids != out.token_ids


def test_row_seeds_of_different_base_seeds_do_not_overlap():
    assert row_seed(0, 5) == 5 and row_seed(1, 0) == 1_000_003
    assert {row_seed(0, i) for i in range(1000)}.isdisjoint({row_seed(1, i) for i in range(1000)})
    with pytest.raises(ValueError, match="seed"):
        row_seed(-1, 0)


@dataclass
class _Out(ProcedureOutput):
    samples: torch.Tensor
    names: list[str]
    nfe: int
    note: str | None = None


def test_concat_outputs_joins_row_fields_keeps_shared_ones_and_names_the_field_it_cannot_merge():
    a = _Out(torch.zeros(2, 3), ["a", "b"], 4)
    b = _Out(torch.ones(1, 3), ["c"], 4)
    c = concat_outputs([a, b])
    assert isinstance(c, _Out) and torch.equal(c.samples, torch.cat([a.samples, b.samples])) and c.names == ["a", "b", "c"]
    assert c.nfe == 4 and c.note is None
    assert concat_outputs([[1, 2], [3]]) == [1, 2, 3]
    with pytest.raises(ValueError, match="'nfe'"):
        concat_outputs([a, _Out(torch.ones(1, 3), ["c"], 5)])
    with pytest.raises(ValueError, match="no rows"):
        independent_rows(lambda r, s: r, [], 0)
