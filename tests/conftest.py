"""Settings shared by every test module."""

from __future__ import annotations

import pytest

from gojax import cli


@pytest.fixture(autouse=True)
def _no_persistent_cache_in_process(monkeypatch):
    """Tests that call ``cli.main`` in the test process run it without the persistent
    compilation cache.

    ``cli.main`` turns the cache on for the whole process, and a pytest worker
    compiles thousands of programs: twice, at the same test after ~600 others
    in one worker, XLA aborted the worker inside ``executable.serialize()``
    while writing an entry (never in a fresh process, nor with that test file
    alone). Commands run as subprocesses keep the cache, as users' do.
    """
    monkeypatch.setattr(cli, "_enable_compilation_cache", lambda: None)
