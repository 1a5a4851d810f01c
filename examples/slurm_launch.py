"""From a Slurm cluster's files to launch lines that keep the placement's choice of GPUs.

An operator's round, in Python:

1. read the cluster from ``topology.conf`` and ``gres.conf`` (its GPU types, and each GPU's
   device number from ``File=/dev/nvidiaN``) and the queue from a job CSV;
2. give the GPUs slowdown factors: draws from PAL's Longhorn measurements when ``../shared`` is
   present (``PAL_OPT_SHARED`` names another shared folder, as for the other examples), else from pal-opt's synthetic Longhorn-like model (Slurm's files carry none; a
   cluster's own measured factors come in through a Blox ``gpu_df``'s ``PerfVar_<class>``
   columns or GraphML ``factor_<class>`` attributes);
3. place the round with the integer program;
4. turn each placed job's Slurm export row into the ``sbatch`` options and, per node, the
   ``CUDA_VISIBLE_DEVICES`` value its task sets (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA
   count devices in PCI bus order, normally that of ``/dev/nvidiaN``).

A ``--gres`` count lets Slurm pick any GPUs of a node, and no sbatch option names GPU indices.
A job alone on its nodes can ask for them whole (``--exclusive`` and every GPU of each node:
Slurm versions differ in what an exclusive job or its steps get without asking, and under
``ConstrainDevices=yes`` a task sees only its step's GPUs) and keep the placement's GPUs with
``CUDA_VISIBLE_DEVICES``, set inside each node's task (Slurm sets the variable in every step's
tasks: a wrapper that ``srun`` starts can pick its node's value by ``$SLURMD_NODENAME``).  Jobs
that share a node need a launcher that holds the node and starts each job on its devices (steps
with ``--overlap`` and no per-step ``--gres``); the script says which jobs those are.

Run it::

    python examples/slurm_launch.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pal_opt
from pal_opt.generate import synthetic_factors
from pal_opt.streams import PipeSafe
from pal_opt.topology import load_slurm, measured_factors, topology_round
from pal_opt.topology.slurm import slurm_rows

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SHARED = Path(os.environ.get("PAL_OPT_SHARED", HERE.parents[1] / "shared"))
LONGHORN = SHARED / "data" / "pal-artifact" / "variability" / "longhorn"


def cuda_visible_devices(indices: str) -> str:
    """A Slurm index list (``0-2,5``) as ``CUDA_VISIBLE_DEVICES`` takes it (``0,1,2,5``).

    >>> cuda_visible_devices("0-2,5")
    '0,1,2,5'
    """
    out: list[str] = []
    for part in indices.split(","):
        first, _, last = part.partition("-")
        out += [str(i) for i in range(int(first), int(last or first) + 1)]
    return ",".join(out)


def nodes_of(row: dict[str, object]) -> list[str]:
    """The nodes of one export row, from its ``gpu_indices`` (``node01:0-3 node02:1``)."""
    return [share.rpartition(":")[0] for share in str(row["gpu_indices"]).split()]


def whole_nodes(cluster: pal_opt.Cluster, nodes: list[str]) -> str:
    """sbatch options for ``nodes`` whole: every GPU of each (by type on a typed cluster), one
    heterogeneous-job component per distinct ``--gres`` value."""
    by_gres: dict[str, list[str]] = {}
    for node in nodes:
        mine = cluster.server_of == cluster.server_ids.index(node)
        types = cluster.gpu_type_names()
        if types is None:
            gres = f"gpu:{int(mine.sum())}"
        else:
            counts: dict[str, int] = {}
            for t in (t for t, m in zip(types, mine.tolist(), strict=True) if m):
                counts[t] = counts.get(t, 0) + 1
            gres = ",".join(f"gpu:{t}:{k}" for t, k in counts.items())
        by_gres.setdefault(gres, []).append(node)
    return " : ".join(f"--exclusive --nodes={len(ns)} --nodelist={','.join(ns)} --gres={g}" for g, ns in by_gres.items())


def launch_lines(cluster: pal_opt.Cluster, row: dict[str, object], shared: set[str]) -> list[str]:
    """The ``sbatch`` line of one export row (its nodes whole, when none of them is in
    ``shared``) and a ``CUDA_VISIBLE_DEVICES`` line per node."""
    mine = [n for n in nodes_of(row) if n in shared]
    if mine:
        head = f"# {row['job']} shares {', '.join(mine)}: start it on its devices from a launcher that holds the node"
    else:
        head = f"sbatch {whole_nodes(cluster, nodes_of(row))} --job-name={row['job']} job.sh"
    lines = [head]
    for share in str(row["gpu_indices"]).split():
        node, _, indices = share.rpartition(":")
        lines.append(f"  in the task on {node}: CUDA_DEVICE_ORDER=PCI_BUS_ID "
                     f"CUDA_VISIBLE_DEVICES={cuda_visible_devices(indices)}")
    return lines


def main() -> tuple[pal_opt.RoundInstance, list[dict[str, object]]]:
    """Place the example round and print its launch lines; returns the round and the export rows."""
    topo = load_slurm(DATA / "topology.conf", gres_conf=DATA / "gres.conf")
    n = len(topo.gpu_ids)
    if LONGHORN.is_dir():
        factors, source = measured_factors(n, LONGHORN, seed=0), f"PAL's Longhorn measurements ({LONGHORN})"
    else:
        factors, source = synthetic_factors(n, 0), "the synthetic Longhorn-like model"
    round_ = topology_round(topo, DATA / "jobs.csv", factors=factors, name="slurm-example")
    cl = round_.cluster
    print(f"{cl.num_gpus} GPUs on {cl.num_servers} nodes, types {', '.join(cl.type_names)}; "
          f"device numbers from gres.conf: {cl.devices is not None}; factors from {source}")
    result = pal_opt.solve(round_, "ilp", backend="highs", time_limit=30)
    print(f"{result.status}: {len(result.placements)} of {len(round_.jobs)} jobs placed, gap {result.gap:.3%}")
    rows = slurm_rows(round_, result)
    jobs_on: dict[str, int] = {}
    for row in rows:
        for node in nodes_of(row):
            jobs_on[node] = jobs_on.get(node, 0) + 1
    shared = {node for node, k in jobs_on.items() if k > 1}
    for row in rows:
        print("\n".join(launch_lines(cl, row, shared)))
    return round_, rows


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        main()
