"""Code the tests run in fresh Python processes: several XLA host devices, several processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from reference import REPO


def host_devices_flags(devices: int) -> str:
    """This process's ``XLA_FLAGS`` (the suite's cheap compiles among them) asking for
    ``devices`` XLA CPU host devices."""
    flags = os.environ.get("XLA_FLAGS", "")
    return f"{flags} --xla_force_host_platform_device_count={devices}".strip()


def run_on_host_devices(script: str, devices: int, timeout: float = 600):
    """``python -c script`` in the repository on ``devices`` XLA CPU host devices."""
    env = dict(os.environ, XLA_FLAGS=host_devices_flags(devices))
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A localhost TCP port nobody listens on now (for a ``jax.distributed`` coordinator)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[tuple[str, str]]:
    """``(stdout, stderr)`` of every process, in order; one still running after ``timeout``
    seconds is killed (its return code then says so)."""
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=timeout))
        except subprocess.TimeoutExpired:
            p.kill()
            outputs.append(p.communicate())
    return outputs


def run_job(
    command: list[str], processes: int, devices: int, timeout: float
) -> list[tuple[str, str]]:
    """``command`` (in the repository) started as processes ``0 .. processes - 1`` of a
    localhost ``jax.distributed`` job (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
    ``JAX_PROCESS_ID``), ``devices`` XLA CPU host devices each; ``(stdout, stderr)`` of
    each, in order. AssertionError with the stderr tails if any exits non-zero."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_PROCESSES=str(processes))
    env["XLA_FLAGS"] = host_devices_flags(devices)
    env["JAX_COORDINATOR_ADDRESS"] = f"127.0.0.1:{free_port()}"
    procs = [
        subprocess.Popen(
            command,
            cwd=REPO,
            env={**env, "JAX_PROCESS_ID": str(i)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    outputs = wait_all(procs, timeout=timeout)
    errors = [err[-3000:] for p, (_, err) in zip(procs, outputs, strict=True) if p.returncode]
    if errors:
        raise AssertionError("\n".join(errors))
    return outputs
