"""Partition a small profiled model into pipeline stages, as PipeDream's optimiser does.

``examples/data/tinynet_graph.txt`` is a made-up profile in PipeDream's ``graph.txt`` format: a
convolution stem, one residual block, a classifier head.  We partition it on one server of 4 GPUs
at two bandwidths, and on 2 servers of 2 GPUs, and print the stages.

Run with ``python examples/pipeline_partition.py``; the same from the command line::

    pal-opt partition examples/data/tinynet_graph.txt --machines 2,2 --bandwidth 25e9,1.25e9
"""

from __future__ import annotations

from pathlib import Path

from pal_opt.pipeline.partition import PartitionResult, partition
from pal_opt.pipeline.profile import load_profile
from pal_opt.pipeline.states import build_states
from pal_opt.streams import PipeSafe

PROFILE = Path(__file__).resolve().parent / "data" / "tinynet_graph.txt"


def show(result: PartitionResult) -> None:
    workers = " x ".join(map(str, result.machines))
    rates = ", ".join(f"{b / 1e9:g} GB/s" for b in result.bandwidths)
    print(f"{workers} workers ({rates}): {result.time_per_sample * 1e3:.3f} ms per sample "
          f"(data-parallel {result.data_parallel_time * 1e3:.3f} ms, one GPU {result.single_stage_time * 1e3:.3f} ms)")
    for stage in result.stages:
        print(f"  {stage.layer_ids[0]}..{stage.layer_ids[-1]:<7} {len(stage.layer_ids):2d} layers "
              f"on {stage.replicas} GPU(s), {stage.compute_time * 1e3:.3f} ms of compute per sample")


def main() -> list[PartitionResult]:
    states = build_states(load_profile(PROFILE))  # the cut points, computed once for every run
    print(f"{PROFILE.name}: {len(states.profile.layers)} layers, {states.n} cut states")
    results = [partition(states, machines, rates)
               for machines, rates in (([4], [25e9]), ([4], [1e9]), ([2, 2], [25e9, 1.25e9]))]
    for result in results:
        show(result)
    return results


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        main()
