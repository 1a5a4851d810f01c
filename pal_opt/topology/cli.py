"""``pal-opt import slurm|k8s|graphml`` and ``pal-opt export slurm|k8s|graphml``.

Import (the instance is written atomically; bad input: one line, exit 2, nothing written)::

    pal-opt import slurm topology.conf (--gpus-per-node N | --slurm-conf slurm.conf | --gres-conf gres.conf) [--down HOSTLIST] ...
    pal-opt import k8s nodes.json [--levels LABEL,LABEL,...] [--gpu-resource nvidia.com/gpu] ...
    pal-opt import graphml cluster.graphml ...
      ... [--jobs JOBS.csv] [--classes A,B,...] [--measurements DIR [--seed S]]
          [--locality-penalty L] [--binning MODE] [--restart-cost S] [--round R] [--name NAME] -o INSTANCE.json

Export a placement (``pal-opt solve --out``) of an instance::

    pal-opt export slurm INSTANCE.json PLACEMENT.json -o placement.tsv
    pal-opt export k8s INSTANCE.json PLACEMENT.json -o pods.json
    pal-opt export graphml INSTANCE.json [PLACEMENT.json] -o cluster.graphml

Only argument parsing and printing live here; :mod:`pal_opt.topology` does the work.  This
module imports nothing heavy, so registering it costs ``pal-opt``'s start-up nothing.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..cliargs import (
    add_restart_arguments,
    check_outputs,
    input_file,
    nonempty,
    nonneg_int,
    output_file,
    penalty,
    pos_int,
    warnings_after_success,
)
from ..errors import OptionError

__all__ = ["add_import_parsers", "add_export_parser"]

def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of non-empty names."""
    items = tuple(x.strip() for x in text.split(","))
    if not text.strip() or any(not x for x in items):
        raise argparse.ArgumentTypeError(f"expected NAME,NAME,..., got {text!r}")
    return items


def _common(p: argparse.ArgumentParser) -> None:
    from ..options import Binning

    p.add_argument("--jobs", type=input_file, metavar="JOBS.csv", help="job queue CSV (job_id, num_gpus, perfclass or model); "
                   "default: an empty queue")
    p.add_argument("--classes", type=_names, metavar="A,B,...",
                   help="application classes (default classA,classB,classC,classD); their factors are 1.0 "
                   "on every GPU unless --measurements")
    p.add_argument("--measurements", type=input_file, metavar="DIR",
                   help="draw factors from PAL's {resnet,bert,pagerank}-longhorn-agg.csv in DIR (as generate does)")
    p.add_argument("--seed", type=nonneg_int, help="seed for --measurements (default 0)")
    p.add_argument("--locality-penalty", type=penalty, default=1.7, metavar="L", help="PAL's λ (default 1.7)")
    p.add_argument("--binning", choices=[b.value for b in Binning], default="pal-artifact",
                   help="binning mode stored in the round (default pal-artifact)")
    add_restart_arguments(p)
    p.add_argument("--name", type=nonempty, help="round name (default: the topology file's name)")
    p.add_argument("-o", "--out", "--output", dest="output", type=output_file, required=True, metavar="INSTANCE.json", help="file to write")
    p.set_defaults(func=_cmd_import)


def add_import_parsers(isub: Any) -> None:
    """Register ``slurm``, ``k8s`` and ``graphml`` under ``pal-opt import``'s sub-parsers."""
    s = isub.add_parser("slurm", help="Slurm topology.conf (+ GPUs per node and their types)",
                        description="Build a round on the cluster of a Slurm topology.conf. The leaf switch "
                        "(or block) is the rack; switches above it collapse into the cluster level. A node's "
                        "GPUs come from --gres-conf, else --slurm-conf, else --gpus-per-node; when every GPU "
                        "node names a GPU type (gpu:a100:8, Type=a100) the cluster is typed. The files may "
                        "Include others.")
    s.add_argument("input", type=input_file, metavar="topology.conf")
    s.add_argument("--gpus-per-node", type=pos_int, metavar="N",
                   help="GPUs of every node (with --slurm-conf or --gres-conf: of nodes neither file gives GPUs)")
    s.add_argument("--slurm-conf", type=input_file, metavar="FILE",
                   help="slurm.conf whose NodeName lines give Gres=gpu:N or gpu:TYPE:N")
    s.add_argument("--gres-conf", type=input_file, metavar="FILE",
                   help="gres.conf whose Name=gpu lines (Type=, File=, Count=) list each node's GPUs; "
                   "they win over --slurm-conf's")
    s.add_argument("--down", metavar="HOSTLIST",
                   help="nodes out of service, e.g. node[03-04] or the output of sinfo -h -t down,drain -o %%N "
                        "(empty: none): their GPUs are failed")
    _common(s)
    k = isub.add_parser("k8s", help="kubectl get nodes -o json, Kueue topology labels",
                        description="Build a round on the nodes of 'kubectl get nodes -o json'. The innermost "
                        "--levels label above kubernetes.io/hostname is the rack; outer labels collapse into "
                        "the cluster level. Cordoned or not-Ready nodes have failed GPUs.")
    k.add_argument("input", type=input_file, metavar="NODES.json")
    k.add_argument("--levels", type=_names, metavar="LABEL,...",
                   help="topology label keys, outermost first, as in Kueue's Topology (default "
                   "cloud.google.com/gce-topology-block,cloud.google.com/gce-topology-subblock,kubernetes.io/hostname)")
    k.add_argument("--gpu-resource", type=nonempty, default="nvidia.com/gpu", metavar="NAME",
                   help="capacity resource that counts GPUs (default nvidia.com/gpu)")
    _common(k)
    g = isub.add_parser("graphml", help="GraphML cluster graph",
                        description="Build a round on a GraphML cluster graph (kind, id, state, factor_<class> "
                        "attributes). Its own factors are used when it has them.")
    g.add_argument("input", type=input_file, metavar="CLUSTER.graphml")
    _common(g)


def add_export_parser(sub: Any) -> None:
    """Register ``pal-opt export slurm|k8s|graphml`` under the top-level sub-parsers."""
    exp = sub.add_parser("export", help="write a placement in a scheduler's form",
                         description="Write a placement in a form a scheduler applies.")
    esub = exp.add_subparsers(dest="format", metavar="FORMAT")
    esub.required = True
    forms = {
        "slurm": ("Slurm node lists and sbatch options per job (tab-separated)", "placement.tsv"),
        "k8s": ("per-pod node assignments (JSON, kind PodPlacements)", "pods.json"),
        "graphml": ("the cluster as GraphML; with a placement, GPUs carry a job attribute", "cluster.graphml"),
    }
    for name, (text, out) in forms.items():
        e = esub.add_parser(name, help=text, description=f"Write {text}.")
        e.add_argument("instance", type=input_file, metavar="INSTANCE.json", help="the round")
        e.add_argument("placement", type=input_file, metavar="PLACEMENT.json", nargs="?" if name == "graphml" else None,
                       help="the placement (what solve --out or repair --out wrote); one that cannot be applied "
                            "(a GPU not free or given twice, a job not in the round, short of GPUs, on a count or "
                            "GPU type it may not use or on mixed types when it does not mix) is refused"
                            + ("; without it, the cluster alone" if name == "graphml" else ""))
        e.add_argument("-o", "--out", "--output", dest="output", type=output_file, required=True, metavar=out, help="file to write")
        e.set_defaults(func=_cmd_export)


def _read_topology(args: argparse.Namespace) -> Any:
    if args.format == "slurm":
        from .slurm import load_slurm

        return load_slurm(args.input, gpus_per_node=args.gpus_per_node, slurm_conf=args.slurm_conf,
                          gres_conf=args.gres_conf, down=args.down)
    if args.format == "k8s":
        from .kubernetes import DEFAULT_LEVELS, load_nodes

        return load_nodes(args.input, levels=args.levels or DEFAULT_LEVELS, resource=args.gpu_resource)
    from .graphml import load_graphml

    return load_graphml(args.input)


def _factors(args: argparse.Namespace, topology: Any) -> Any:
    from ..model import PAL_CLASSES
    from .hierarchy import measured_factors, uniform_factors

    if args.seed is not None and not args.measurements:
        raise OptionError("--seed draws factors from --measurements; give both or neither")
    if topology.factors is not None:
        if args.classes or args.measurements:
            raise OptionError(f"{args.input} has its own factors; --classes and --measurements are for files "
                              "without")
        return None
    classes = args.classes or PAL_CLASSES
    n = len(topology.gpu_ids)
    if args.measurements:
        return measured_factors(n, args.measurements, classes, 0 if args.seed is None else args.seed)
    return uniform_factors(n, classes)


def _import_inputs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The files ``import`` reads: the topology, ``--jobs``, ``--slurm-conf``, ``--gres-conf``,
    ``--measurements``'s, and the files the Slurm configuration files include."""
    from ..io.measurements import longhorn_paths

    configs: list[tuple[str, Any]] = [("topology file", args.input),
                                      ("--slurm-conf", getattr(args, "slurm_conf", None)),
                                      ("--gres-conf", getattr(args, "gres_conf", None))]
    files = [*configs, ("--jobs", args.jobs)]
    if args.measurements:
        files += [(f"--measurements {args.measurements}", p) for p in longhorn_paths(args.measurements).values()]
    if args.format == "slurm":
        from .slurmconf import included_files

        for (what, path), kind in zip(configs, ("topology.conf", "slurm.conf", "gres.conf"), strict=True):
            if path is not None and os.path.isfile(path):  # read as its reader reads it, with its errors
                files += [(f"file included by {what}", p) for p in included_files(path, what=kind)]
    return files


def _cmd_import(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..io import save_instance
    from ..io.textfile import source_name
    from .hierarchy import topology_round

    check_outputs({"--out": args.output}, _import_inputs(args))
    with warnings_after_success():  # a round refused as it is written: its one line, no warning before it
        topo = _read_topology(args)
        inst = topology_round(
            topo, args.jobs, factors=_factors(args, topo), locality_penalty=args.locality_penalty,
            binning=args.binning, restart_cost=args.restart_cost, round_length=args.round,
            name=args.name or source_name(args.input, args.format),
        )
        names = list(topo.level_names)
        meta = {
            "generator": f"pal-opt {__version__} import {args.format}",
            "imported_from": {"format": args.format, "topology": os.fspath(args.input), "jobs": args.jobs},
            "topology_levels": names,
            "rack_level": names[0] if names else None,
            "collapsed_into_cluster": names[1:],
        }
        save_instance(inst, args.output, meta=meta, readable_from=os.fspath(args.input))
    cl = inst.cluster
    collapsed = f"; {', '.join(names[1:])} collapsed into the cluster level" if len(names) > 1 else ""
    racks = f" in {len(cl.rack_ids)} rack{'s' * (len(cl.rack_ids) != 1)} (rack level {names[0]}{collapsed})" if cl.racked else " (flat)"
    failed = int((cl.state == 2).sum())
    types = ("; GPU types " + ", ".join(f"{t} ({n})" for t, n in zip(cl.type_names, cl.type_counts.tolist(),
                                                                      strict=True))) if cl.typed else ""
    nominal = all(bool((f == 1.0).all()) for f in cl.factors.values())
    factors = ("; every GPU factor 1.0: no variability to place by (--measurements DIR draws it from PAL's "
               "measurements)" if nominal else "")
    print(f"wrote {args.output}: {inst.name}: {cl.num_gpus} GPUs on {cl.num_servers} server{'s' * (cl.num_servers != 1)}{racks}; "
          f"{failed} GPU{'s' * (failed != 1)} failed; {len(inst.jobs)} job{'s' * (len(inst.jobs) != 1)}{types}{factors}")
    return 0


def _indices_note(inst: Any) -> str:
    """What the export's GPU indices are: device numbers, or ranks when the instance has none."""
    if inst.cluster.devices is not None:
        return "; GPU indices are device numbers"
    return ("; GPU indices are ranks among each node's GPU ids (the instance has no device numbers: gres.conf "
            "File=/dev/nvidiaN, Blox Local_GPU_ID or cluster.gpus.device give them)")


def _cmd_export(args: argparse.Namespace) -> int:
    from ..io import atomic_write_text, load_instance, load_placement_file

    check_outputs({"--out": args.output}, [("INSTANCE.json", args.instance),
                                           ("PLACEMENT.json", args.placement)])
    inst = load_instance(args.instance)
    doc = load_placement_file(args.placement) if args.placement else None
    src = os.fspath(args.placement) if args.placement else None
    if args.format == "slurm":
        from .slurm import format_slurm_rows, slurm_rows

        rows = slurm_rows(inst, doc or {}, source=src, instance_source=os.fspath(args.instance))
        text, what = format_slurm_rows(rows), f"{len(rows)} jobs{_indices_note(inst)}"
    elif args.format == "k8s":
        from .kubernetes import dumps_pod_placements, pod_placements

        pods = pod_placements(inst, doc or {}, source=src)
        jobs = {str(item["job"]) for item in pods["items"]}
        text, what = dumps_pod_placements(pods), f"{len(jobs)} jobs in {len(pods['items'])} pods{_indices_note(inst)}"
    else:
        from .graphml import graphml_text
        from .placement import gpu_jobs, gpu_stages

        held = gpu_jobs(inst, doc, source=src) if doc is not None else {}
        piped = any(j.pipeline is not None for j in inst.jobs)
        stages = gpu_stages(inst, doc, source=src) if doc is not None and piped else None
        text = graphml_text(inst.cluster, held, stages)
        what = f"{inst.cluster.num_gpus} GPUs, {len(set(map(str, held.values())))} jobs placed"
    atomic_write_text(args.output, text)
    print(f"wrote {args.output}: {what}")
    return 0
