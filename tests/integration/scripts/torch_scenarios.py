"""Runs several of examples/pytorch's scripts in one set of processes, for partrain's torch tests.

    torchrun --nproc-per-node 4 torch_scenarios.py --expect DIR/expected [--scenarios a,b]

Each rank imports torch once (seconds on a small machine) and runs the scenarios' train()
functions one after another in one default group, exactly as their main() would; their output
is theirs. With --expect, each rank writes DIR/expected.<rank>.json: per scenario, its first
step in the run (the trace numbers steps across scenarios: each optimizer's steps continue the
count), its number of steps and the collectives its tensors imply (the scripts' --expect).
--fail-at-step N makes the last rank raise at step N of the first scenario (ddp_train's option).
"""

import argparse
import gc
import importlib.util
import json
import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                        "examples", "pytorch")
SCENARIOS = ("ddp_train", "fsdp2_train", "hsdp_train", "tensor_parallel_2d", "new_group_midway",
             "profiler_schedule")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--expect")
    parser.add_argument("--fail-at-step", type=int)
    args = parser.parse_args()
    import torch.distributed as dist
    dist.init_process_group("gloo")
    scenarios = []
    first_step = 0
    try:
        for index, name in enumerate(args.scenarios.split(",")):
            module = load(name)
            argv = []
            if index == 0 and args.fail_at_step is not None:
                argv = ["--fail-at-step", str(args.fail_at_step)]
            expected = module.train(module.parse_args(argv))
            expected.update(name=name, first_step=first_step)
            scenarios.append(expected)
            first_step += expected["steps"]
            gc.collect()  # the scenario's optimizer goes: the next one's marks the steps
        if args.expect:
            with open(f"{args.expect}.{dist.get_rank()}.json", "w") as out:
                json.dump({"world_size": dist.get_world_size(), "scenarios": scenarios}, out)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
