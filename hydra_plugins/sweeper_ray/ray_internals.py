"""Every private Ray API the launcher uses, here and nowhere else: what each is for, and the
Ray version it was run on (RUN_ON; the tests run them all: tests/test_ray_launcher.py,
tests/test_validate.py). A Ray release that moves one breaks it here only; each caller
says what it does without it (an ImportError or AttributeError is theirs to catch, as each
does today).

- enable_token_auth: ray._private.authentication.authentication_token_setup._enable_token_auth
- token_auth_enabled: ray._private.authentication.authentication_utils.is_token_auth_enabled
- local_only_after_import: ray._private.ray_constants.ENABLE_RAY_CLUSTER
- logs_dir: ray._private.worker.global_worker.node.get_logs_dir_path()
- canonical_address: ray._private.services.canonicalize_bootstrap_address
- gcs_client: ray._raylet.GcsClient
- task_attempt: ray._private.worker.global_worker.core_worker.get_current_task_attempt_number()
"""

from __future__ import annotations

import sys
from typing import Any

RUN_ON = ("2.60.0",)  # the Ray versions these were run on


def enable_token_auth() -> None:
    """RAY_AUTH_MODE=token, and Ray's cached config told (what Ray does by default, set
    explicitly, so that it prints no hint to turn it off). ImportError on a Ray without it."""
    from ray._private.authentication.authentication_token_setup import _enable_token_auth

    _enable_token_auth()


def token_auth_enabled() -> bool:
    """Whether Ray's token authentication is on. ImportError on a Ray without it."""
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    return bool(is_token_auth_enabled())


def local_only_after_import() -> None:
    """Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER when it is imported; where it was imported
    before the launcher set it (a test, say), its copy of the setting is turned off too."""
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        setattr(constants, "ENABLE_RAY_CLUSTER", False)


def logs_dir() -> str:
    """Where Ray writes its workers' own logs, this session's (this process must have joined Ray)."""
    import ray

    return ray._private.worker.global_worker.node.get_logs_dir_path()


def canonical_address(address: str) -> str | None:
    """"auto", "host:port" or "ray://..." as the host:port of a cluster's GCS; None where it
    names no cluster. Raises on a malformed address, or "auto" with no cluster here."""
    from ray._private import services

    return services.canonicalize_bootstrap_address(address)


def gcs_client(address: str) -> Any:
    """A client of the cluster's GCS at host:port: it raises where the cluster refuses this
    process (an authentication error: it wants a token)."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # Cython: no type information

    return GcsClient(address=address)


def task_attempt() -> int:
    """Which attempt of the running task this is (0 the first; 1 once Ray ran it again after
    its worker or node was lost). AttributeError on a Ray without it."""
    import ray

    return int(ray._private.worker.global_worker.core_worker.get_current_task_attempt_number())  # type: ignore[attr-defined]
