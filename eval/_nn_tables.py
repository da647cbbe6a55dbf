"""The network caches an engine keeps between searches (``gojax.search.new_cache``), one
table per kind of search (board size, rules, ownership kept...): the GTP player's and the
analysis engine's bookkeeping in one place.

A search takes its table donated (no copy of it per call) and gives back the one to
keep: :meth:`NNTables.take` hands the table out of the store and :meth:`NNTables.keep`
puts the returned one back, so that a search that fails loses its table (the next one
starts an empty one) and never leaves a deleted one behind.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class NNTables:
    """Tables of ``2 ** size_log2`` evaluations by kind; ``size_log2`` 0 keeps none."""

    def __init__(self, size_log2: int) -> None:
        self.size_log2 = int(size_log2)
        self._tables: dict[Hashable, Any] = {}

    def take(self, kind: Hashable, make: Callable[[int], Any]) -> Any:
        """The table of ``kind`` out of the store (``make(size_log2)`` if there is none),
        or None without caches."""
        if not self.size_log2:
            return None
        table = self._tables.pop(kind, None)
        return make(self.size_log2) if table is None else table

    def keep(self, kind: Hashable, table: Any) -> None:
        """Store the table a search gave back (None: nothing to keep)."""
        if table is not None:
            self._tables[kind] = table

    def clear(self) -> None:
        """Forget every stored evaluation."""
        self._tables.clear()

    def stats(self) -> dict[str, int] | None:
        """The tables' counters summed (``lookups``, ``hits``, ``size``, ``filled``) and
        how many ``tables`` there are, or None without caches."""
        if not self.size_log2:
            return None
        from gojax.search import cache_stats

        return cache_stats(*self._tables.values()) | {"tables": len(self._tables)}
