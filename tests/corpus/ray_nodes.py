"""A Ray cluster of a head and two worker nodes on this machine, held by this process for a test session.

Run by ``tests/corpus/conftest.py`` (``python ray_nodes.py``): it prints one
JSON line (the cluster's address and its worker nodes' ids), then obeys one
command per line on stdin, answering one JSON line each:

- ``actors``: the actors Ray's state API lists (class, state, node id, pid);
- ``raylet N``: the pids of worker node N's raylet (its actors' processes descend from it);
- ``remove N``: kill worker node N (``kill -9`` of its raylet and workers);
- ``add``: start another worker node;
- end of input: shut the cluster down.

The head offers no CPU, so every actor runs on a worker node; each worker
node offers one CPU. The nodes inherit this process's environment: the
``AWS_*`` variables of the test's S3 server and a ``PYTHONPATH`` with the
tests' stand-in models, which the actors unpickle.
"""

from __future__ import annotations

import json
import os
import sys

OBJECT_STORE_BYTES = 96 * 1024**2


def main() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    worker_args = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": True, "node_ip_address": "127.0.0.1",
        "dashboard_host": "127.0.0.1"})
    workers = [cluster.add_node(**worker_args) for _ in range(2)]
    cluster.wait_for_nodes()
    say({"address": cluster.address, "workers": [w.node_id for w in workers]})
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "actors":
            from ray.util.state import list_actors

            dashboard = cluster.head_node.address_info["webui_url"]  # the GCS address would be resolved off loopback
            actors = list_actors(address=f"http://{dashboard}", detail=True, limit=1000,
                                 raise_on_missing_output=False)
            say([{"class_name": a.class_name, "state": a.state, "node_id": a.node_id, "pid": a.pid} for a in actors])
        elif command == "raylet":
            raylets = workers[int(argument)].all_processes[ray_constants.PROCESS_TYPE_RAYLET]
            say({"pids": [p.process.pid for p in raylets]})
        elif command == "remove":
            cluster.remove_node(workers[int(argument)], allow_graceful=False)
            say({"removed": int(argument)})
        elif command == "add":
            workers.append(cluster.add_node(**worker_args))
            cluster.wait_for_nodes()
            say({"added": workers[-1].node_id})
    cluster.shutdown()


def say(data: object) -> None:
    print(json.dumps(data), flush=True)


if __name__ == "__main__":
    main()
