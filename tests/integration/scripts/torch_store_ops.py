"""Every operation of torch's own TCPStore client against the store on MASTER_ADDR:MASTER_PORT
(partrain's, under `partrain launch`, as torchrun's agent store): prints one line per operation
that behaved as torch's own server makes it behave; exits 1 at the first that did not."""
import datetime
import os
import sys
import threading
import time

import torch.distributed as dist


def check(name, condition, detail=""):
    if not condition:
        print(f"torch_store_ops: {name} FAILED {detail}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)


def client(timeout_s=10):
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                         is_master=False, timeout=datetime.timedelta(seconds=timeout_s))


def main():
    check("agent store", os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True")
    store = client()
    other = client()

    store.set("key", "value")
    check("set/get", store.get("key") == b"value")
    check("add", store.add("counter", 5) == 5 and other.add("counter", -2) == 3)
    check("get of a counter", store.get("counter") == b"3")
    check("check", store.check(["key", "counter"]) and not store.check(["key", "absent"]))
    store.wait(["key"])
    check("wait for a key already set", True)

    # A blocking get, released by another client's set.
    threading.Timer(0.3, lambda: other.set("late", "arrived")).start()
    started = time.monotonic()
    check("blocking get released by a set", store.get("late") == b"arrived"
          and time.monotonic() - started >= 0.2)

    # A wait that times out: the client cancels it (CANCEL_WAIT) and raises.
    started = time.monotonic()
    try:
        store.wait(["never"], datetime.timedelta(milliseconds=300))
        check("wait timeout", False, "no exception")
    except Exception as error:  # torch raises DistStoreError
        check("wait timeout", time.monotonic() - started < 5, repr(error))
    check("the connection is usable after a cancelled wait", store.get("key") == b"value")

    check("compare_set on an absent key", store.compare_set("cas", "", "first") == b"first")
    check("compare_set mismatch", store.compare_set("cas", "other", "second") == b"first")
    check("compare_set match", store.compare_set("cas", "first", "second") == b"second")

    store.multi_set(["m1", "m2"], ["one", "two"])
    check("multi_set/multi_get", store.multi_get(["m1", "m2"]) == [b"one", b"two"])
    store.append("log", "ab")
    store.append("log", "cd")
    check("append", store.get("log") == b"abcd")
    check("delete_key", store.delete_key("m1") and not store.delete_key("m1"))
    keys = set(store.list_keys())
    check("list_keys", {"key", "counter", "late", "cas", "m2", "log"} <= keys, str(keys))
    check("num_keys", store.num_keys() == len(keys), f"{store.num_keys()} vs {len(keys)}")

    store.queue_push("q", "first")
    store.queue_push("q", b"second")
    check("queue_len", store.queue_len("q") == 2)
    check("queue_pop", store.queue_pop("q") == b"first" and store.queue_pop("q") == b"second")
    try:
        store.queue_pop("q", block=False)
        check("queue_pop of an empty queue", False, "no exception")
    except Exception as error:
        check("queue_pop of an empty queue", "empty" in repr(error).lower(), repr(error))
    threading.Timer(0.3, lambda: other.queue_push("q", "pushed later")).start()
    check("blocking queue_pop released by a push", store.queue_pop("q") == b"pushed later")

    results = []
    waiter = threading.Thread(target=lambda: results.append(other.barrier("b", 2) is None))
    waiter.start()
    time.sleep(0.2)
    check("barrier holds the first arrival", not results)
    store.barrier("b", 2)
    waiter.join(10)
    check("barrier", results == [True])

    big = b"x" * (4 << 20)
    store.set("big", big)
    check("a 4 MiB value", store.get("big") == big)

    # A script that asks for the server itself on MASTER_PORT, as rank 0 does without an agent
    # store: torch keeps the agent's (its bind fails) and is a client of it.
    master = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                           is_master=True, timeout=datetime.timedelta(seconds=10))
    check("is_master=True on MASTER_PORT shares the agent store", master.get("key") == b"value")
    print("all TCPStore operations ok", flush=True)


if __name__ == "__main__":
    main()
