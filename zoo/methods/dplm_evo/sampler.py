"""DPLM-Evo's samplers as one :class:`~registry.contract.Procedure` with three modes (de novo generation,
simulated evolution, post-editing; :mod:`.editing` has the loop). Output: :class:`EditOutput`, one entry per row,
with the explicit edit trajectory of every row (:func:`.editing.replay` of ``initial`` + ``trajectories[i]`` gives
``sequences[i]``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Annotated, Any

import torch

from registry.contract import Procedure
from registry.limits import Bound, Length, Rows, Sequences
from registry.results import ProcedureOutput

from .editing import MASK_CHAR, EditConfig, edit_row, from_text, to_text
from .params import EditSamplerCli, EditSamplerParams

__all__ = ["EditOutput", "EditSampler", "EXAMPLE_SEQUENCES"]

#: Members of the toy family (``family(0).train[:3]``), used as example inputs of the editing modes.
EXAMPLE_SEQUENCES = ("TDTVTPANFRAF", "TDTVTPANLARAF", "WDTVTPDNDFRAF")


@dataclass
class EditOutput(ProcedureOutput):
    """``sequences`` (final rows, letters), ``initial`` (start rows; ``#`` = mask), ``trajectories`` (per row, a list
    of steps ``{"deleted", "inserted", "substituted"}``), ``stats`` (forwards, deletions, insertions, edits)."""

    sequences: list[str]
    initial: list[str] = field(default_factory=list)
    trajectories: list[list[dict]] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.sequences)


class EditSampler(Procedure):
    """De novo (``m^L`` start), simulated evolution (re-noising, temperature 1) or post-editing (greedy redraw of the
    noisy set) with the delete / insert / fill / re-noise step of the paper."""

    batch_independent = True

    Params = EditSamplerParams

    Cli = EditSamplerCli

    CliInputs = Cli

    def config(self) -> EditConfig:
        p = self.params
        return EditConfig(p.steps, p.tau_del, p.tau_ins, p.tau_sub, p.renoise_fraction, p.temperature, p.max_length,
                          stochastic_edits=p.stochastic_edits, ancestral=p.ancestral, renoise_omega_del=p.renoise_omega_del,
                          renoise_omega_ins=p.renoise_omega_ins, residue_scoring=p.residue_scoring, edit_sites=p.edit_sites)

    def _starts(self, sequences: Any, lengths: Any) -> list[str]:
        if self.params.mode == "de-novo":
            if sequences is not None:
                raise ValueError("mode de-novo starts from masks: pass lengths= (or num_samples=), not sequences=")
            ls = [self.params.length] if lengths is None else ([lengths] if isinstance(lengths, int) else list(lengths))
            return [MASK_CHAR * int(n) for n in ls]
        if sequences is None:
            raise ValueError(f"mode {self.params.mode} edits proteins: pass sequences= (a string or a list of strings)")
        return [sequences] if isinstance(sequences, str) else list(sequences)

    def __call__(self, sequences: Sequences = None, *, seed: int = 0,
                 lengths: Length | Annotated[Sequence[Length], Bound("rows")] | None = None,
                 num_samples: Rows | None = None) -> EditOutput:
        """Each row is edited with its own generator seeded by ``seed`` (row ``i`` of a batch equals row ``i``
        alone); ``num_samples`` (de novo only) draws that many ``m^length`` rows from one generator instead.
        Rows of one call therefore share their random stream and are correlated: for independent draws (a population
        statistic) give each row its own seed (:func:`.metrics.independent_rows`)."""
        net = self.models[self.params.net_role]
        cfg = self.config()
        if num_samples is not None:
            if self.params.mode != "de-novo" or sequences is not None or lengths is not None:
                raise ValueError("num_samples= is for mode de-novo without lengths=")
            starts = [MASK_CHAR * self.params.length] * num_samples
            g = torch.Generator().manual_seed(seed)
            gens = [g] * num_samples
        else:
            starts = self._starts(sequences, lengths)
            gens = [torch.Generator().manual_seed(seed) for _ in starts]
        for s in starts:
            if len(s) > cfg.max_length:
                raise ValueError(f"a start row of length {len(s)} exceeds max_length {cfg.max_length}")
        out = EditOutput([], [], [], [])
        for s, g in zip(starts, gens):
            final, traj, stats = edit_row(net, from_text(s), cfg, g)
            out.sequences.append(to_text(final))
            out.initial.append(s)
            out.trajectories.append([t.as_dict() for t in traj])
            out.stats.append(stats)
        return out

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        if self.params.mode == "de-novo":
            return {"lengths": [10 + (i % 5) for i in range(batch_size)]}
        return {"sequences": [EXAMPLE_SEQUENCES[i % len(EXAMPLE_SEQUENCES)] for i in range(batch_size)]}

    def input_rows(self, inputs):
        if "lengths" in inputs:
            return [{"lengths": [n]} for n in inputs["lengths"]]
        return [{"sequences": [s]} for s in inputs["sequences"]]

    def output_rows(self, outputs: EditOutput) -> list[EditOutput]:
        return [EditOutput([outputs.sequences[i]], [outputs.initial[i]], [outputs.trajectories[i]], [outputs.stats[i]])
                for i in range(len(outputs.sequences))]

    def run_cli(self, inputs, seed: int) -> str:
        inputs = inputs if inputs is not None else self.Cli()
        lines = []
        for i in range(inputs.num_samples):  # sample i is seeded by seed + i (rows of one call share the seed)
            if self.params.mode == "de-novo":
                out = self(seed=seed + i, lengths=[inputs.length or self.params.length])
            else:
                out = self(seed=seed + i, sequences=[inputs.sequence or EXAMPLE_SEQUENCES[0]])
            lines.append(f"{out.initial[0]} -> {out.sequences[0]}  ({out.stats[0]['edits']} edits, {out.stats[0]['forwards']} forwards)")
        return "\n".join(lines)
