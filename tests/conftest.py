"""Settings shared by every test module."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from gojax._xla_flags import fast_cpu_compiles

# The suite compiles thousands of XLA programs and runs most once: at XLA's cheapest
# optimisation level (gojax/_xla_flags.py) it takes about a quarter less time (975 tests
# on 2 cores: 1113 -> 859 s). Same functions, rounded differently; a level-0 run found
# NaN gradients in the gpool max that level 2 hid. Set before any computation starts the
# backend; workers and the commands tests start inherit it. A level in XLA_FLAGS wins:
# XLA_FLAGS=--xla_backend_optimization_level=2 runs the tests as users' programs compile.
fast_cpu_compiles()

from eval import cli  # noqa: E402

# One persistent XLA compilation cache for the whole test run, shared by the pytest
# workers and the gojax commands tests start as subprocesses: many tests compile the
# same programs (the same tiny nets, boards and searches) in different processes.
# Created by the first process (the controller under xdist; workers inherit the
# variable) and removed when it ends. GOJAX_TEST_CACHE=0 turns it off.
_CACHE_VARIABLE = "GOJAX_TEST_CACHE"
_cache_owner = pytest.StashKey[str]()  # the folder, on the process that created it


def pytest_configure(config):
    if _CACHE_VARIABLE not in os.environ:
        os.environ[_CACHE_VARIABLE] = tempfile.mkdtemp(prefix="gojax-test-xla-")
        config.stash[_cache_owner] = os.environ[_CACHE_VARIABLE]
    cache = os.environ[_CACHE_VARIABLE]
    if cache in ("", "0"):
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    os.environ["GOJAX_CACHE"] = cache  # what `gojax ...` subprocesses cache into


def pytest_unconfigure(config):
    owned = config.stash.get(_cache_owner, None)
    if owned:
        shutil.rmtree(owned, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_persistent_cache_in_process(monkeypatch):
    """Tests that call ``cli.main`` in the test process run it without the persistent
    compilation cache, which it would turn on for the whole worker process (every
    later test's programs would be written to the user's cache). Commands run as
    subprocesses keep the cache, as users' do.
    """
    monkeypatch.setattr(cli, "_enable_compilation_cache", lambda: None)


def _memory_maps() -> int:
    """How many memory mappings this process holds (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after a test module once the worker holds many mappings.

    Every compiled XLA CPU program keeps ~20 memory mappings while a cache holds it, and
    a pytest worker that runs half the suite compiles thousands: one reached 65,064 of
    Linux's default limit of 65,530 (``vm.max_map_count``) and then aborted inside XLA's
    compiler ("Fatal Python error: Aborted" in a late test's compile). With this the
    most seen is ~30,000. A user's process compiles a handful of programs per board size
    and setting.
    """
    yield
    if _memory_maps() > 20_000:
        import gc

        import jax

        jax.clear_caches()
        gc.collect()
