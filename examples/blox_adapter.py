"""Using pal-opt as a Blox placement policy, with Blox's objects mocked by plain namespaces.

In Blox itself you would write ``placement = BloxPlacement(args, method="ilp", backend="highs")``
where it builds ``PALPlacement(args)``; ``place`` takes and returns the same things.

    python examples/blox_adapter.py
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from pal_opt.adapters.blox import BloxPlacement
from pal_opt.streams import PipeSafe


def main() -> tuple[list[object], dict[object, list[int]]]:
    gpu_df = pd.DataFrame(
        {
            "GPU_ID": range(8),
            "Node_ID": [0, 0, 0, 0, 1, 1, 1, 1],
            "IN_USE": [True, False, False, False, False, False, False, False],
            "JOB_IDS": [41, None, None, None, None, None, None, None],  # job 41 runs outside the queue
            "PerfVar_classA": [1.00, 1.21, 0.97, 1.00, 0.96, 1.02, 1.00, 1.40],
            "PerfVar_classB": [1.00, 1.05, 1.00, 0.99, 1.00, 1.01, 1.00, 1.10],
        }
    )
    job_state = SimpleNamespace(
        active_jobs={
            1: {"num_GPUs": 2, "job_model": "resnet50", "perfclass": "classA", "is_running": False},
            2: {"num_GPUs": 4, "job_model": "BERT", "perfclass": "classB", "is_running": False},
        }
    )
    schedule = {"job_order": [(1, 0.0), (2, 0.0)]}
    args = SimpleNamespace(locality_penalty=1.7)
    for method in ("pal", "ilp"):
        policy = BloxPlacement(args, method=method)
        terminate, launch = policy.place(job_state, SimpleNamespace(gpu_df=gpu_df), schedule)
        res = policy.last_result
        assert res is not None
        print(f"{method:>4}: terminate {terminate}, launch {launch}, geomean slowdown {res.geomean_slowdown:.3f}")
    return terminate, launch


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        main()
