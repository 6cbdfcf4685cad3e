"""A torch.distributed program whose entry point is decorated with torch's @record: rank 2
raises, the others wait (to be stopped by the launcher). torch writes rank 2's exception into
its TORCHELASTIC_ERROR_FILE for the launcher to read back."""
import time

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def check_the_batch(rank):
    raise ValueError(f"rank {rank} found a bad batch")


@record
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"rank {rank} joined", flush=True)
    if rank == 2:
        check_the_batch(rank)
    time.sleep(120)


if __name__ == "__main__":
    main()
