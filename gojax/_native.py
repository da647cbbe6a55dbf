"""Native CPU kernels called from XLA: compiled on first use, cached, loaded, registered.

A kernel is one C++ source in this package that defines XLA FFI handlers
(``XLA_FFI_DEFINE_HANDLER_SYMBOL``). :class:`Kernel` compiles it with the
system's C++ compiler (``$CXX`` or ``c++``) for this CPU (``-march=native``,
without it where the compiler refuses) into a cache folder (the kernel's own
variable if set, else ``$GOJAX_NATIVE_CACHE``, else ``$XDG_CACHE_HOME/gojax``,
else ``~/.cache/gojax``), keyed by the source, the flags, jaxlib and the CPU,
loads it from there afterwards and registers its handlers as CPU targets of
``jax.ffi``; a source may also export plain C functions, which callers reach
through :meth:`Kernel.library` (``ctypes``). Without a compiler it warns once
and reports the kernel unavailable, and its callers take their XLA version.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-w")
_log = logging.getLogger(__name__)


def cpu_signature() -> str:
    """What ``-march=native`` depends on: the CPU's model name and feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or platform.machine()
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = [line for line in text.splitlines() if line.split(":")[0].strip() in wanted]
    return "\n".join(sorted(set(lines)))


class Kernel:
    """One C++ source compiled into a cached shared library, its FFI targets registered.

    Args:
      source: the ``.cc`` file's name in this package.
      prefix: the cached library's name starts with it.
      targets: FFI target name -> the handler symbol the source defines.
      title: what a compiler error calls it ("the Winograd kernel").
      fallback: the warning's words when it is off ("... off, XLA's used instead").
      switch: environment variable that turns it off when ``0``.
      cache_env: environment variable naming its own cache folder, if any.
    """

    def __init__(
        self,
        source: str,
        prefix: str,
        targets: dict[str, str],
        title: str,
        fallback: str,
        switch: str,
        cache_env: str | None = None,
    ):
        self.source = Path(__file__).with_name(source)
        self.prefix = prefix
        self.targets = dict(targets)
        self.title = title
        self.fallback = fallback
        self.switch = switch
        self.cache_env = cache_env
        self._lock = threading.Lock()
        self._state: dict[str, object] = {}

    def cache_dir(self) -> Path:
        for name in (self.cache_env, "GOJAX_NATIVE_CACHE"):
            if name and os.environ.get(name):
                return Path(os.environ[name])
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(base) / "gojax"

    def _compile(self, compiler: str, flags: list[str], out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            tmp_out = Path(tmp) / out.name
            include = f"-I{jax.ffi.include_dir()}"
            command = [compiler, *flags, include, str(self.source), "-o", str(tmp_out)]
            subprocess.run(command, check=True, capture_output=True, timeout=300)
            os.replace(tmp_out, out)  # atomic: a concurrent process sees all of it or none

    def build(self) -> Path:
        """The compiled library for this machine, compiled now if the cache lacks it."""
        import jaxlib

        compiler = os.environ.get("CXX", "c++")
        # The source and the package's headers it may include (the key must change with them).
        headers = sorted(self.source.parent.glob("_*.h"))
        source = b"\0".join([self.source.read_bytes(), *(h.read_bytes() for h in headers)])
        suffix = ".dylib" if platform.system() == "Darwin" else ".so"
        errors = []
        # -march=native where the compiler takes it (GCC, Clang on x86 and Arm), else generic.
        for arch in (["-march=native"], []):
            flags = [*_FLAGS, *arch]
            parts = [source, " ".join([compiler, *flags]).encode()]
            parts += [jaxlib.__version__.encode(), cpu_signature().encode()]
            key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
            path = self.cache_dir() / f"{self.prefix}-{key}{suffix}"
            if path.exists():
                return path
            try:
                self._compile(compiler, flags, path)
                return path
            except (OSError, subprocess.SubprocessError) as error:
                stderr = (getattr(error, "stderr", b"") or b"").decode(errors="replace")
                errors.append(f"{' '.join(flags)}: {error} {stderr[-500:]}")
        raise RuntimeError(f"could not compile {self.title}:\n" + "\n".join(errors))

    def available(self) -> bool:
        """Whether the kernel is compiled, loaded and registered with XLA (CPU).

        The first call compiles it if needed (a few seconds); a failure is logged
        once with the compiler's message, and later calls answer False at once.
        """
        if os.environ.get(self.switch) == "0":
            return False
        with self._lock:
            if "ok" not in self._state:
                try:
                    library = ctypes.cdll.LoadLibrary(str(self.build()))
                    for target, symbol in self.targets.items():
                        capsule = jax.ffi.pycapsule(getattr(library, symbol))
                        jax.ffi.register_ffi_target(target, capsule, platform="cpu")
                    self._state["library"] = library  # keep it loaded
                    self._state["ok"] = True
                except (OSError, RuntimeError, AttributeError) as error:
                    _log.warning("%s: %s", self.fallback, error)
                    self._state["ok"] = False
                    self._state["error"] = str(error)
            return bool(self._state["ok"])

    def library(self) -> ctypes.CDLL | None:
        """The loaded library, for its plain C entry points (called through ``ctypes``);
        ``None`` where :meth:`available` is False."""
        return self._state.get("library") if self.available() else None


def batched_calls(call: Callable) -> Callable:
    """``call`` of arrays that share a leading axis ``K`` (a kernel's boards), as a function
    whose ``vmap``, of any depth, still makes one ``call``: the ``[B, K, ...]`` arrays
    (unbatched ones broadcast) flattened to ``[B * K, ...]`` and every output reshaped
    back, so that a kernel gets all of a batch's boards at once (shared out over threads)
    rather than one board at a time."""

    @jax.custom_batching.custom_vmap
    def one_call(*args):
        return call(*args)

    @one_call.def_vmap
    def batched(axis_size, in_batched, *args):
        args = [
            x if is_batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
            for x, is_batched in zip(args, in_batched, strict=True)
        ]
        k = args[0].shape[1]
        out = one_call(*(x.reshape((axis_size * k,) + x.shape[2:]) for x in args))
        out = jax.tree.map(lambda y: y.reshape((axis_size, k) + y.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)  # itself again: an outer vmap flattens too

    return one_call
