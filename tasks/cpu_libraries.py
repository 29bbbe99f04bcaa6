"""The C++ kernel libraries a CPU job built, kept with its compile (the compile store).

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

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

SUFFIXES = (".so", ".so.load_ok")


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
        from torch._inductor.cpp_builder import get_cpp_compiler

        compiler = subprocess.run([get_cpp_compiler(), "--version"], capture_output=True, text=True,
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
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
            tmp.write_bytes(tar.extractfile(member).read())
            tmp.chmod(0o755)
            os.replace(tmp, dest)  # a half-written library is never loaded
            put += 1
    return put
