#!/usr/bin/env python3
"""A first look at a partrain trace through its public views (docs/trace-format.md), until
`partrain analyze` exists: per rank the time in each phase, and the collectives per communicator
and op with their count, bytes and time."""
import sqlite3
import sys


def main(path: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    run_id, status, world = db.execute("SELECT run_id, status, world_size FROM runs").fetchone()
    steps = db.execute("SELECT count(DISTINCT step) FROM steps").fetchone()[0]
    print(f"run {run_id}: {status}, {world} ranks, {steps} steps")
    print(f"{'rank':>4} {'phase':<18} {'total ms':>10} {'per step ms':>12}")
    for rank, name, total in db.execute(
            "SELECT rank, name, sum(dur_ns) FROM slices WHERE category IN ('phase', 'step') "
            "GROUP BY rank, name ORDER BY rank, name"):
        print(f"{rank:>4} {name:<18} {total / 1e6:>10.1f} {total / 1e6 / max(steps, 1):>12.2f}")
    print(f"\n{'communicator':<28} {'op':<15} {'count':>7} {'MiB':>10} {'ms':>10}")
    for comm, op, count, size, total in db.execute(
            "SELECT comm_id, op, count(*), sum(bytes), sum(dur_ns) FROM collectives "
            "WHERE rank = 0 GROUP BY comm_id, op ORDER BY sum(dur_ns) DESC LIMIT 12"):
        print(f"{comm:<28} {op:<15} {count:>7} {size / 2**20:>10.2f} {total / 1e6:>10.1f}")
    print("(collectives of rank 0; times are from the recording communicator's start to end)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
