"""A worker for `partrain launch -n N -- python3 torchrun_env.py`: checks the torchrun environment
contract with the standard library only, then connects to MASTER_ADDR:MASTER_PORT (the rendezvous
store) over TCP, as torch.distributed's env:// initialisation would. Exit 0 when all holds."""
import os
import socket
import sys


def fail(message):
    print(f"torchrun_env: {message}", file=sys.stderr)
    sys.exit(1)


def integer(name):
    value = os.environ.get(name)
    if value is None:
        fail(f"{name} is not set")
    try:
        return int(value)
    except ValueError:
        fail(f"{name}={value!r} is not an integer")


def main():
    rank, local_rank = integer("RANK"), integer("LOCAL_RANK")
    world, local_world = integer("WORLD_SIZE"), integer("LOCAL_WORLD_SIZE")
    group_rank, port = integer("GROUP_RANK"), integer("MASTER_PORT")
    expected_world = int(sys.argv[1]) if len(sys.argv) > 1 else world
    if world != expected_world:
        fail(f"WORLD_SIZE={world}, expected {expected_world}")
    if not 0 <= local_rank < local_world:
        fail(f"LOCAL_RANK={local_rank} outside LOCAL_WORLD_SIZE={local_world}")
    if rank != group_rank * local_world + local_rank:
        fail(f"RANK={rank} != GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK")
    if integer("ROLE_RANK") != rank or integer("ROLE_WORLD_SIZE") != world:
        fail("ROLE_RANK / ROLE_WORLD_SIZE disagree with RANK / WORLD_SIZE")
    for name in ("MASTER_ADDR", "TORCHELASTIC_RUN_ID", "PARTRAIN_RUN_ID", "PARTRAIN_TOKEN"):
        if not os.environ.get(name):
            fail(f"{name} is not set")
    if "PARTRAIN_NPROC_PER_NODE" in os.environ:
        fail("the launcher's own PARTRAIN_NPROC_PER_NODE leaked into the worker")
    try:
        with socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=10):
            pass
    except OSError as error:
        fail(f"cannot connect to {os.environ['MASTER_ADDR']}:{port}: {error}")
    print(f"ok rank={rank} world={world}", flush=True)


if __name__ == "__main__":
    main()
