"""Shared storage for a sweep on a cluster (hydra.launcher.storage_path): a folder every node
sees at the same path, or object storage by URI, read and written with pyarrow's
filesystems (local, S3 and S3-compatible servers, GCS, HDFS).

Workers write each job's artifacts and the compile store here directly, and read a store
entry from here only when their node lacks it (sweeper/stores/compile_store.py: fetch), so
that none of it passes through the driver: only the job's record travels through Ray.

Layout under the storage path:
- `sweeps/<sweep key>/<job>/`: a job's folder (traces, module copies, tables, log), as the
  driver's sweep folder would hold it without storage;
- `compile_store/torch-<version>/<key hash>.bin|.json|.libs.tar.gz`: the compile store.

A location a record shows is `scheme://bucket/path` (the URI's query, which says how to
connect, left out) or, for a folder, its absolute path."""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sweeper.stores.storage_uri import credentials_in, redacted  # noqa: F401 (read as storage.X too)

SWEEPS = "sweeps"
COMPILE_STORE = "compile_store"
_CHUNK = 8 << 20


class StorageError(Exception):
    """The storage path cannot be used (a bad URI, no such bucket, no permission)."""


# Seconds a storage call may take: pyarrow's default for GCS retries for 15 minutes (a gs://
# path with no credentials held the start for about 16 minutes, deaf to Ctrl-C). Bounded, a
# call that cannot be made fails in seconds with the storage's own message: GCS's retries
# stop after CALL_TIMEOUT_S, S3 gives up a connection after CALL_TIMEOUT_S / 3 and a request
# (one part of an upload) after S3_REQUEST_TIMEOUT_S, long enough for a part on a slow link.
CALL_TIMEOUT_S = 15.0
S3_REQUEST_TIMEOUT_S = 60.0


def _bounded(uri: str) -> str:
    """The URI with pyarrow's own retry limit where its scheme takes one in the URI and the
    user gave none (GCS: retry_limit_seconds)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("gs", "gcs"):
        return uri
    query = dict(parse_qsl(parts.query))
    query.setdefault("retry_limit_seconds", f"{CALL_TIMEOUT_S:g}")
    return urlunsplit(parts._replace(query=urlencode(query)))


def _s3(uri: str):
    """An S3 filesystem for `s3://bucket/path?options` with bounded connect and request
    timeouts and retries (an S3 URI takes no timeout among its options, so the filesystem is
    made here from the options it does take), and its root path."""
    from urllib.parse import parse_qsl, urlsplit

    import pyarrow.fs as pafs

    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query))
    known = {"region", "scheme", "endpoint_override", "allow_bucket_creation", "allow_bucket_deletion"}
    unknown = sorted(set(query) - known)
    if unknown:
        raise StorageError(f"storage_path={redacted(uri)}: unknown S3 option {', '.join(unknown)} (known: "
                           f"{', '.join(sorted(known))})")
    kwargs: dict = {k: v for k, v in query.items() if k in ("region", "scheme", "endpoint_override")}
    env_endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if env_endpoint and "endpoint_override" not in kwargs:
        # as the AWS tools read it (docs/running.md): pyarrow's S3 filesystem, made here, does not
        where = urlsplit(env_endpoint if "://" in env_endpoint else f"https://{env_endpoint}")
        kwargs["endpoint_override"] = where.netloc
        kwargs.setdefault("scheme", where.scheme or "https")
    for flag in ("allow_bucket_creation", "allow_bucket_deletion"):
        if flag in query:
            kwargs[flag] = query[flag].lower() in ("1", "true", "yes", "on")
    fs = pafs.S3FileSystem(connect_timeout=CALL_TIMEOUT_S / 3, request_timeout=S3_REQUEST_TIMEOUT_S,
                           retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=3), **kwargs)
    return fs, f"{parts.netloc}{parts.path}".rstrip("/")


@functools.lru_cache(maxsize=8)
def _filesystem(uri: str):
    """(pyarrow filesystem, root path in it) for a URI or an absolute folder; one a process."""
    import pyarrow.fs as pafs

    if "://" not in uri:
        return pafs.LocalFileSystem(), uri.rstrip("/") or "/"
    problem = credentials_in(uri)
    if problem:
        raise StorageError(problem)
    try:
        if uri.lower().startswith("s3://"):
            return _s3(uri)
        fs, root = pafs.FileSystem.from_uri(_bounded(uri))
    except (ValueError, OSError, TypeError) as e:
        raise StorageError(f"storage_path={redacted(uri)}: {e}") from None
    return fs, root.rstrip("/")


def relative_to(storage: "Storage", location: str) -> str | None:
    """The path under `storage` of a location a record shows (Storage.location), or None
    where it lies elsewhere."""
    base = storage.location()
    if location == base:
        return ""
    return location[len(base):].lstrip("/") if location.startswith(base.rstrip("/") + "/") else None


@dataclass(frozen=True)
class Storage:
    uri: str  # a URI with a scheme (s3://bucket/prefix?endpoint_override=...), or an absolute folder

    @classmethod
    def of(cls, path: str | None, cwd: Path | None = None) -> Storage | None:
        """The storage of a storage_path setting (None: none); a relative folder is taken
        from `cwd` (the driver's), since every node must see it at the same path."""
        if not path:
            return None
        text = str(path)
        if text.startswith("file://"):
            text = text[len("file://"):]
        if "://" not in text:
            text = str((Path(cwd or os.getcwd()) / Path(text).expanduser()).resolve())
        return cls(text)

    @property
    def local(self) -> bool:
        return "://" not in self.uri

    def _path(self, rel: str) -> str:
        return f"{_filesystem(self.uri)[1]}/{rel.strip('/')}" if rel.strip("/") else _filesystem(self.uri)[1]

    def location(self, rel: str = "") -> str:
        """Where `rel` is, as a record names it."""
        if self.local:
            return self._path(rel)
        scheme = self.uri.split("://", 1)[0]
        return f"{scheme}://{self._path(rel)}"

    def stat(self, rel: str) -> tuple[int, float] | None:
        """(bytes, modification time in seconds) of a file, None when there is none."""
        import pyarrow.fs as pafs

        fs = _filesystem(self.uri)[0]
        info = fs.get_file_info(self._path(rel))
        if info.type != pafs.FileType.File:
            return None
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return int(info.size or 0), mtime

    def _put(self, rel: str, write: Callable[[Any], object]) -> None:
        """`write(stream)` into `rel`, replacing what was there whole: a folder's copy is
        written beside it and renamed; an object store's put is whole already."""
        fs = _filesystem(self.uri)[0]
        dest = self._path(rel)
        target = f"{dest}.{uuid.uuid4().hex[:8]}.part" if self.local else dest
        if self.local:
            fs.create_dir(dest.rsplit("/", 1)[0], recursive=True)
        try:
            with fs.open_output_stream(target, compression=None) as out:  # the bytes as given: pyarrow guesses gzip from ".gz"
                write(out)
            if self.local:
                fs.move(target, dest)
        except BaseException:
            if self.local:  # a failed write (a full disk) leaves no .part behind to keep it full
                try:
                    fs.delete_file(target)
                except OSError:
                    pass
            raise

    def put_file(self, local: Path, rel: str) -> int:
        """A local file to `rel`, whole; its bytes."""
        with open(local, "rb") as src:
            self._put(rel, lambda out: shutil.copyfileobj(src, out, _CHUNK))
        return Path(local).stat().st_size

    def put_bytes(self, data: bytes, rel: str) -> None:
        self._put(rel, lambda out: out.write(data))

    def put_tree(self, local_dir: Path, rel: str, leave_out: tuple[str, ...] = ()) -> int:
        """Every file under `local_dir` (its top-level entries named in `leave_out` left out)
        to `rel`, keeping the tree; its bytes."""
        total = 0
        for top in sorted(Path(local_dir).iterdir()):
            if top.name in leave_out:
                continue
            files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
            for f in files:
                total += self.put_file(f, f"{rel}/{f.relative_to(local_dir).as_posix()}")
        return total

    def get_file(self, rel: str, local: Path) -> int:
        """`rel` into a local file (written beside it, then renamed); its bytes."""
        fs = _filesystem(self.uri)[0]
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{uuid.uuid4().hex[:8]}")
        try:
            with fs.open_input_stream(self._path(rel), compression=None) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
            os.replace(tmp, local)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return local.stat().st_size

    def read_bytes(self, rel: str) -> bytes:
        fs = _filesystem(self.uri)[0]
        with fs.open_input_stream(self._path(rel), compression=None) as src:
            return src.read()

    def delete(self, rel: str) -> None:
        """A file, if there is one."""
        fs = _filesystem(self.uri)[0]
        if self.stat(rel) is not None:
            fs.delete_file(self._path(rel))

    def problem(self) -> str | None:
        """Why this storage cannot be used from here (a probe file written, read back and
        removed), None if it can."""
        probe = f".sweeper-write-check-{uuid.uuid4().hex[:8]}"
        try:
            self.put_bytes(b"ok", probe)
            ok = self.read_bytes(probe) == b"ok"
            self.delete(probe)
        except (OSError, StorageError, ValueError) as e:
            message = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            return (f"hydra.launcher.storage_path={redacted(self.uri)}: cannot be written and read back ({message}); "
                    "give a folder every node sees at the same path, or an object storage URI this machine and the "
                    "nodes have credentials for (docs/running.md, \"Shared storage (`storage_path`)\")")
        return None if ok else f"hydra.launcher.storage_path={redacted(self.uri)}: a file written there read back different"

    def problem_within(self, seconds: float = 2 * CALL_TIMEOUT_S) -> str | None:
        """problem(), in a thread the caller waits on: Ctrl-C stops the wait at once (a
        pyarrow call holds the main thread deaf to it), and a storage that has not answered
        in `seconds` is a problem too."""
        import threading

        got: list = []
        worker = threading.Thread(target=lambda: got.append(self.problem()), daemon=True)
        worker.start()
        worker.join(seconds)  # an interruptible wait: KeyboardInterrupt comes through
        if worker.is_alive():
            return (f"hydra.launcher.storage_path={redacted(self.uri)}: no answer in {seconds:g} s (no network "
                    "route or no credentials?); give a folder every node sees at the same path, or an object "
                    "storage URI this machine and the nodes can reach (docs/running.md, \"Shared storage "
                    "(`storage_path`)\")")
        return got[0] if got else None
