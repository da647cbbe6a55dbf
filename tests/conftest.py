"""Settings shared by every test module."""

from __future__ import annotations

import pytest

from gojax import cli


@pytest.fixture(autouse=True)
def _no_persistent_cache_in_process(monkeypatch):
    """Tests that call ``cli.main`` in the test process run it without the persistent
    compilation cache, which it would turn on for the whole worker process (every
    later test's programs would be written to the user's cache). Commands run as
    subprocesses keep the cache, as users' do.
    """
    monkeypatch.setattr(cli, "_enable_compilation_cache", lambda: None)


@pytest.fixture(autouse=True)
def _xla_flags_untouched_in_process(monkeypatch):
    """An in-process ``cli.main`` would add the Eigen convolution flag to ``XLA_FLAGS`` for the
    rest of the worker (too late for this process's XLA, but every later subprocess would
    inherit it). Subprocess commands decide for themselves, as users' do."""
    monkeypatch.setattr(cli, "_prefer_eigen_convolutions", lambda: None)
