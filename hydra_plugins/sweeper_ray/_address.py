"""Is there a Ray cluster at this address? Asked before ray.init, which on a wrong address
either retries for minutes or hangs (a port that accepts TCP but is not Ray's GCS), and
ends in a long traceback.

The question is asked the way Ray itself will ask it, in a child process that is killed
after `connect_timeout_s`:
- the address is resolved as ray.init resolves it (services.canonicalize_bootstrap_address:
  "auto" and $RAY_ADDRESS looked up, 127.0.0.1 and localhost swapped for the machine's own
  address), so the address checked is the one Ray will dial;
- its TCP port is tried, then Ray's own GCS client says hello (GcsClient, as `ray status`
  does). A GCS that answers but refuses this driver's token (Ray's token authentication)
  is a Ray cluster all the same: the message says so and where the token goes.

Run as `python -m hydra_plugins.sweeper_ray._address ADDRESS`, the child prints one JSON
line per step reached, so a parent that had to kill it still knows how far it got."""

from __future__ import annotations

import json
import subprocess
import sys

from sweeper.sweep.validate import SweepConfigError

_FIX = "check hydra.launcher.address / RAY_ADDRESS, or leave both unset for an embedded local Ray"


def check_ray_address(address: str, timeout_s: float = 10.0) -> str:
    """The address Ray will dial, once something there answered as a Ray cluster within
    `timeout_s`; else SweepConfigError naming the address, what was tried and the fix."""
    if address.startswith("ray://"):
        # Ray Client needs `ray[client]` (grpcio) on the driver, and its workers could not
        # bring a job's folder back through the node-local scratch path this launcher uses.
        raise SweepConfigError(
            f"Ray address {address}: ray:// (Ray Client) is not supported. Run the sweep on a machine of "
            "the cluster with its GCS address (hydra.launcher.address=HEAD:6379), or submit it there: "
            "ray job submit --address http://HEAD:8265 --working-dir . -- python -m sweeper ... (where the "
            "head runs its dashboard; docs/running.md)")
    host, colon, port = address.rpartition(":")
    if colon and host and not port.isdigit():
        raise SweepConfigError(f"Ray address {address!r}: the port {port!r} is not a number "
                               "(expected HOST:PORT, e.g. head:6379, or auto)")
    try:
        child = subprocess.run([sys.executable, "-m", __name__, address], capture_output=True, text=True,
                               timeout=timeout_s)
        out, killed = child.stdout, False
    except subprocess.TimeoutExpired as e:
        out, killed = (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""), True
    steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    reached = {s["step"]: s for s in steps}
    dialled = reached.get("resolved", {}).get("address", address)
    via = "" if dialled == address else f" (Ray dials {dialled})"
    if "answered" in reached:
        return dialled
    if "refused" in reached:  # a Ray cluster, with token authentication, and another token than this driver's
        raise SweepConfigError(
            f"the Ray cluster at {address}{via} refused this driver's credentials ({reached['refused']['message']}); "
            "give the driver the cluster's token: RAY_AUTH_TOKEN, or the file ~/.ray/auth_token (or "
            "RAY_AUTH_TOKEN_PATH) as on the cluster's nodes (docs/running.md)")
    if "error" in reached:
        raise SweepConfigError(f"no Ray cluster at {address}{via}: {reached['error']['message']}; {_FIX}")
    if killed and "tcp_open" in reached:
        raise SweepConfigError(
            f"{address}{via} accepts TCP connections but did not answer as a Ray cluster's GCS within "
            f"{timeout_s:.0f} s (tried: TCP connect, then Ray's GCS handshake); is it the GCS port "
            f"(`ray start --head --port`, 6379 by default)? {_FIX}")
    if killed:
        raise SweepConfigError(f"no Ray cluster answers at {address}{via} within {timeout_s:.0f} s "
                               f"(tried: TCP connect); {_FIX}")
    raise SweepConfigError(f"could not check the Ray address {address}{via}: the check ended with exit code "
                           f"{child.returncode}: {child.stderr.strip().splitlines()[-1:] or ['no message']}; {_FIX}")


def _say(step: str, **fields) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def _probe(address: str) -> None:
    import socket

    from hydra_plugins.sweeper_ray import ray_internals

    try:
        resolved = ray_internals.canonical_address(address)
    except Exception as e:  # "auto" with no cluster running here, a malformed address
        _say("error", message=f"{type(e).__name__}: {e}")
        return
    if resolved is None:
        _say("error", message="it names no cluster (\"local\" starts a new one; leave the address unset for that)")
        return
    _say("resolved", address=resolved)
    host, _, port = resolved.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except (OSError, ValueError) as e:
        _say("error", message=f"TCP connect to {resolved} failed ({getattr(e, 'strerror', None) or e})")
        return
    _say("tcp_open")
    try:
        ray_internals.gcs_client(resolved)
    except Exception as e:
        if "Authentication" in type(e).__name__:  # it is Ray, and it wants a token we lack
            _say("refused", message=str(e).split(". ")[0])
        else:
            _say("error", message=f"Ray's GCS client failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return
    _say("answered")


if __name__ == "__main__":
    _probe(sys.argv[1])
