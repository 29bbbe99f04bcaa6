"""The C++ kernel libraries a CPU job built, kept with its compile (the compile store), and
Inductor's instruction-set probes, kept for every job of the host (probes_into, keep_probes).

PyTorch's cache blob (torch.compiler.save_cache_artifacts) carries a job's graphs and its
Triton kernels, not the shared libraries Inductor builds for C++ kernels: loaded on a CPU,
the graphs are a cache hit, and then every C++ kernel is built again with g++ (about two
thirds of a small model's warm compile). Inductor names each library by the hash of its
source and compile command and builds only a library that is not in its cache folder
(torch/_inductor/codecache.py: CppCodeCache.load_async, _worker_compile_cpp), so the
libraries put back at the same place in a later job's cache folder are used as they are.

They are built with -march=native, which the hash does not see: a library is used only on
a host whose CPU (model and flags) and compiler are those it was built with (host_id);
elsewhere the kernels build again, as without this. The files kept are the libraries at
<cache>/<2 characters>/<name>.so and Inductor's `.so.load_ok` marks (its instruction-set
probes, checked once a library loaded), nothing else of the cache folder.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from sweeper.record import atomic_write_bytes

SUFFIXES = (".so", ".so.load_ok")


@functools.cache
def host_id() -> dict:
    """What a library built here depends on beyond its source and flags: the CPU's model and
    flags (-march=native) and the compiler. {"id": a hash of them, "cpu": the model, "compiler": its version}."""
    model = flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and not model:
                model = value.strip()
            elif name.strip() == "flags" and not flags:
                flags = value.strip()
    except OSError:
        pass
    compiler = ""
    try:
        from sweeper.torch_internals.probes import cpp_compiler

        compiler = subprocess.run([cpp_compiler(), "--version"], capture_output=True, text=True,
                                  timeout=30).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001 - no compiler found: the id says so, and matches no other host
        compiler = "unknown"
    digest = hashlib.sha1("\n".join((model, " ".join(sorted(flags.split())), compiler)).encode()).hexdigest()[:16]
    return {"id": digest, "cpu": model, "compiler": compiler}


def _libraries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("*/*") if p.name.endswith(SUFFIXES) and p.is_file() and not p.is_symlink())


def pack(cache: Path) -> tuple[bytes, int]:
    """The libraries of the Inductor cache folder `cache` as a gzipped tar (paths relative to
    it), and how many files it holds; (b"", 0) when there are none."""
    files = _libraries(cache)
    if not files:
        return b"", 0
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(cache)), recursive=False)
    return buf.getvalue(), len(files)


def unpack(data: bytes, cache: Path) -> int:
    """Put the libraries of `data` (pack's) into the cache folder `cache`, before the job
    compiles; a file already there is left as it is. Returns how many were put there.
    Anything but a library at <2 characters>/<name> is refused (tarfile.ReadError)."""
    put = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if (not member.isfile() or len(parts) != 2 or len(parts[0]) != 2 or ".." in parts
                    or not parts[1].endswith(SUFFIXES)):
                raise tarfile.ReadError(f"not a kernel library: {member.name!r}")
            dest = cache / parts[0] / parts[1]
            if dest.exists():
                continue
            src = tar.extractfile(member)
            if src is None:
                raise tarfile.ReadError(f"not a kernel library: {member.name!r}")
            atomic_write_bytes(dest, src.read(), file_mode=0o755)  # a half-written library is never loaded
            put += 1
    return put


# Inductor's instruction-set probes (torch/_inductor/cpu_vec_isa.py: VecISA.check_build):
# before its first C++ kernel, a process builds a small library for each instruction set
# and loads it in a fresh Python (`import torch`), unless its cache folder holds the
# library and its `.load_ok` mark; 9.5 s of every cold CPU compile on a 2-core machine.
# Their answer depends on the host alone, so the host keeps them, node-local, for every job
# of that torch on that CPU and compiler: PROBES/torch-<version>-<host id>/<2 chars>/<name>
# ($SWEEPER_CPU_PROBES moves it: the tests keep their own).
PROBES = Path(os.environ.get("SWEEPER_CPU_PROBES") or Path(tempfile.gettempdir()) / "sweeper-cpu-probes")


def _probes_folder(torch_version: str) -> Path:
    return PROBES / f"torch-{torch_version}-{host_id()['id']}"


def _probe_files(cache: Path) -> list[tuple[Path, Path]]:
    """(library, its .load_ok mark) of each probe that built and loaded in `cache`."""
    pairs = [(mark.with_name(mark.name.removesuffix(".load_ok")), mark) for mark in sorted(cache.glob("*/*.so.load_ok"))]
    return [(lib, mark) for lib, mark in pairs if lib.is_file()]


def probes_into(cache: Path, torch_version: str) -> int:
    """Before the job compiles: the host's probes into its Inductor cache folder `cache`;
    how many were put there (0 where the host has none yet)."""
    return _copy_probes(_probes_folder(torch_version), cache)


def keep_probes(cache: Path, torch_version: str) -> int:
    """After the job compiled: its probes that the host does not keep yet, kept; how many."""
    return _copy_probes(cache, _probes_folder(torch_version))


def _copy_probes(src: Path, dest: Path) -> int:
    """The probes of the cache folder `src` that `dest` lacks, copied there; each file written
    whole, then renamed (jobs beside it read the host's folder at any time), the mark last:
    a mark says its library is there."""
    copied = 0
    for lib, mark in _probe_files(src):
        folder = dest / lib.parent.name
        if (folder / mark.name).exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for path in (lib, mark):
            tmp = folder / f".{path.name}.{os.getpid()}"
            shutil.copy2(path, tmp)
            os.replace(tmp, folder / path.name)
        copied += 1
    return copied
