"""Ray, started for one call or reached at an address: the only module that starts, joins or stops it.

A local Ray is started lean (no dashboard, no pre-started idle workers, a
bounded object store) and stopped when the call ends. An address is checked
with a TCP connection first, so an unreachable one is a one-line error in
seconds instead of Ray's minutes of retries; Ray's own connect timeouts are
shortened as a second guard. A Ray already initialised in this process (a
test session's, an application's) is used as it is and left running.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from codesearch.exceptions import ClusterUnavailableError

OBJECT_STORE_BYTES = 256 * 1024**2
"""The object store of a local Ray: blocks stream through it, so a small one bounds /dev/shm use."""
PREFLIGHT_SECONDS = 3.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_QUIET = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # An unreachable address fails in seconds, not minutes (never lower the *reconnect* timeout: Ray exits the process).
    "RAY_py_gcs_connect_timeout_s": "3",
    "RAY_NUM_REDIS_GET_RETRIES": "1",
    "RAY_gcs_rpc_server_connect_timeout_s": "1",
}


def _import_ray() -> Any:
    for name, value in _QUIET.items():
        os.environ.setdefault(name, value)
    try:
        import ray
    except ImportError:
        raise ClusterUnavailableError("Ray is not installed; pip install 'codesearch-hybrid[corpus]'") from None
    return ray


def preflight(address: str, timeout: float = PREFLIGHT_SECONDS) -> None:
    """Raise unless a TCP connection to ``address`` (``host:port``) opens within ``timeout`` seconds.

    ``auto`` and ``local`` are not checked (Ray finds or starts the cluster itself).

    Raises:
        ClusterUnavailableError: the address is malformed or nothing answers there.
    """
    if address in ("auto", "local"):
        return
    host, port = _host(address), address.rpartition(":")[2]
    if not host or not port.isdigit():
        raise ClusterUnavailableError(f"--ray-address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379)")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterUnavailableError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it with `ray start --head`, "
            "or leave --ray-address out to run on a local Ray") from None


def _host(address: str) -> str:
    return address.removeprefix("ray://").rpartition(":")[0].strip("[]")


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """Ray for one call: joined at ``address``, or started locally with ``num_cpus`` (default: all cores).

    Yields the ``ray`` module. A Ray this call started is shut down when it ends.

    Raises:
        ClusterUnavailableError: Ray is missing, or the address cannot be reached.
    """
    if address is not None:
        preflight(address)
        if _host(address) in LOOPBACK:
            # A cluster at a loopback address is on this machine and may listen on loopback only: this process
            # joins it as a loopback node (Ray otherwise rewrites 127.0.0.1 to the machine's network address, and
            # reads this switch when it is imported).
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        try:
            if address is not None:
                ray.init(address=address, logging_level="WARNING", log_to_driver=False)
            else:
                ray.init(address="local", num_cpus=num_cpus, num_gpus=None, include_dashboard=False,
                         object_store_memory=OBJECT_STORE_BYTES, logging_level="WARNING", log_to_driver=False,
                         _system_config={"enable_worker_prestart": False})
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ClusterUnavailableError(f"cannot join Ray at {address or 'a local cluster'}: {first}") from None
        started = True
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        yield ray
    finally:
        if started:
            ray.shutdown()


def cluster_cpus_gpus(ray: Any) -> tuple[int, int]:
    """The CPUs and GPUs the cluster offers."""
    resources = ray.cluster_resources()
    return int(resources.get("CPU", 1)), int(resources.get("GPU", 0))


__all__ = ["OBJECT_STORE_BYTES", "PREFLIGHT_SECONDS", "cluster_cpus_gpus", "preflight", "ray_session"]
