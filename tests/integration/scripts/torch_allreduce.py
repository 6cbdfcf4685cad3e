"""An unmodified torch.distributed program: init_process_group("gloo") from the environment
(env://), a few all_reduces checked against their sums, a barrier. Prints one line per rank."""
import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for step in range(3):
        tensor = torch.tensor([float(rank + step)])
        dist.all_reduce(tensor)
        expected = sum(range(world)) + world * step
        if tensor.item() != expected:
            raise SystemExit(f"rank {rank}: all_reduce gave {tensor.item()}, expected {expected}")
    dist.barrier()
    print(f"rank {rank} of {world}: 3 all_reduces ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
