"""Where the shared reference data lives: $GOJAX_REFERENCE, default ../shared/reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("GOJAX_REFERENCE", REPO.parent / "shared" / "reference"))


def reference_path(*parts: str) -> Path:
    """A file or folder under the reference data; skips the test, saying why, if absent."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data not found at {path}: set GOJAX_REFERENCE")
    return path
