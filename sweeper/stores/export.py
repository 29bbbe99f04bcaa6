"""The autotune store carried between machines (`python -m sweeper.store export|import`): an
export is a tarball of every key's file with a manifest (format version, a checksum and the
counts for each file); import checks all of it before it writes anything, then merges under
the store's locks."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweeper.stores import autotune_store as st


FORMAT = "sweeper-autotune-store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_MEMBER = re.compile(r"^torch-[A-Za-z0-9.+_-]+/[A-Za-z0-9_-]+\.json$")  # torch-<version>/<system hash>.json


class StoreCommandError(Exception):
    """Bad input to the command (a missing, damaged or foreign file): exit 2."""


def printable(text: object) -> str:
    """A name from a store or an export as a terminal may show it: control characters (an
    escape sequence that would recolour or clear the screen) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def keys(store: Path) -> list[Path]:
    """The store's key files, torch-<version>/<system>.json."""
    return sorted(store.glob("torch-*/*.json")) if store.is_dir() else []


def export(store: Path, out: Path) -> int:
    if os.path.lexists(out) and not out.is_file():
        # a device, FIFO, folder or dangling link there: replacing it with a regular file
        # (as os.replace would) destroys what the user pointed at
        raise StoreCommandError(f"{out}: there is something there that is not a regular file (a device, FIFO, folder "
                                "or link to nothing); name a new file, or a regular file to replace")
    found = keys(store)
    if not found:
        raise StoreCommandError(f"{store}: the store is empty, nothing to export (run an autotune=on sweep first, "
                                "or name another store with --store)")
    files: list[dict[str, Any]] = []
    blobs: dict[str, bytes] = {}
    for path in found:
        with st.locked(path.parent, path.stem):  # a sweep writing it now: the whole file or the one before
            data = path.read_bytes()
        doc = json.loads(data)
        rel = f"{path.parent.name}/{path.name}"
        blobs[rel] = data
        files.append({"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                      "ops": st.count_ops(doc.get("cache") or {}), "choices": st.count_entries(doc.get("cache") or {}),
                      "kernel_configs": len(doc.get("kernel_configs") or {})})
    manifest = {"format": FORMAT, "version": FORMAT_VERSION,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "files": files}
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tmp, "w:gz") as tar:
            for name, data in [(MANIFEST, json.dumps(manifest, indent=1).encode()), *blobs.items()]:
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), int(time.time())
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise StoreCommandError(f"{out}: cannot be written ({e.strerror or e}); name a file in a folder you can "
                                "write") from None
    print(f"exported {len(files)} keys ({sum(f['ops'] for f in files)} ops, "
          f"{sum(f['kernel_configs'] for f in files)} kernel configs) from {store} to {out} "
          f"({out.stat().st_size / 1e6:.2f} MB)")
    return 0


MANIFEST_MAX_BYTES = 10_000_000  # a manifest lists files: anything larger is not one
# One key file's size at most: a real store's key file holds a few MB (the headline's four
# jobs: 142 ops, 976 kernel configs in 1.4 MB); a 1.4 MB export that unpacked to a 300 MB
# key file took 947 MB at its peak. Checked from the member's header, before it is read.
KEY_MAX_BYTES = 64_000_000


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, size: int | None = None) -> bytes:
    """A regular member's bytes; StoreCommandError for a link or folder (a link's target
    would be read instead), or a member whose size is not the one expected, checked
    before anything is read."""
    if not member.isreg():
        raise StoreCommandError(f"damaged: {member.name} is a {'link' if member.issym() or member.islnk() else 'folder or device'}, "
                                "not a file; export it again")
    if size is not None and member.size != size:
        raise StoreCommandError(f"damaged: {member.name} holds {member.size} bytes, its manifest says {size}; "
                                "export it again")
    f = tar.extractfile(member)
    if f is None:
        raise StoreCommandError(f"damaged: {member.name} is not a file; export it again")
    return f.read()


def read_export(path: Path) -> tuple[dict, dict[str, dict]]:
    """The manifest and every key's document of an export, all checked; StoreCommandError
    naming what is wrong and what to do otherwise."""
    if not path.is_file():
        raise StoreCommandError(f"{path}: no such file (make one with `python -m sweeper.store export FILE`)")
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = {m.name: m for m in tar.getmembers()}
            if MANIFEST not in members:
                raise StoreCommandError(f"{path}: not a sweeper store export (no {MANIFEST}); "
                                        "make one with `python -m sweeper.store export FILE`")
            if members[MANIFEST].size > MANIFEST_MAX_BYTES:
                raise StoreCommandError(f"damaged: its {MANIFEST} holds {members[MANIFEST].size} bytes, not a manifest")
            manifest = json.loads(_member_bytes(tar, members[MANIFEST]))
            _check_manifest(path, manifest)
            docs = {}
            for entry in manifest["files"]:
                rel = entry.get("path", "") if isinstance(entry, dict) else ""
                if not _MEMBER.match(str(rel)) or rel not in members or not members[rel].isfile():
                    raise StoreCommandError(f"{path}: damaged: {rel!r} is listed in its manifest but not held as a key file")
                size = entry.get("bytes")
                if not isinstance(size, int) or isinstance(size, bool):
                    raise StoreCommandError(f"{path}: damaged: its manifest gives {rel} no size")
                if members[rel].size > KEY_MAX_BYTES:
                    raise StoreCommandError(f"{path}: {rel} holds {members[rel].size / 1e6:.0f} MB: no key file of a "
                                            f"store is that large (at most {KEY_MAX_BYTES / 1e6:.0f} MB); not imported")
                data = _member_bytes(tar, members[rel], size)
                if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
                    raise StoreCommandError(f"{path}: damaged: {rel} does not match its checksum; export it again")
                try:
                    docs[rel] = st.read_doc_bytes(data, f"{path}:{rel}")
                except st.StoreError as e:
                    raise StoreCommandError(f"{path}: damaged: {e}") from None
    except StoreCommandError as e:
        raise StoreCommandError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeDecodeError) as e:
        raise StoreCommandError(f"{path}: damaged or not a sweeper store export ({type(e).__name__}: {e}); "
                                "export it again") from None
    return manifest, docs


def _check_manifest(path: Path, manifest) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreCommandError(f"{path}: not a sweeper store export (its manifest names no {FORMAT!r} format)")
    if manifest.get("version") != FORMAT_VERSION:
        raise StoreCommandError(f"{path}: an export of format version {manifest.get('version')!r}; this sweeper reads "
                                f"version {FORMAT_VERSION}: export it with the same sweeper version as this one")
    if not isinstance(manifest.get("files"), list):
        raise StoreCommandError(f"{path}: damaged: its manifest lists no files")


def import_(store: Path, path: Path) -> int:
    manifest, docs = read_export(path)  # everything checked before the store is touched
    total_new = total_configs = 0
    for rel, doc in docs.items():  # every document's shape checked: a merge cannot fail half way
        try:
            st.merge_doc({"cache": {}, "kernel_configs": {}}, doc)
        except (AttributeError, TypeError, ValueError) as e:
            raise StoreCommandError(f"{path}: damaged: {printable(rel)} cannot be merged ({type(e).__name__}); "
                                    "nothing was imported; export it again") from None
    for rel, doc in docs.items():
        folder_name, system = rel.split("/")[0], rel.split("/")[1].removesuffix(".json")
        new, configs = st.merge_into_store(store / folder_name, system, doc)
        total_new, total_configs = total_new + new, total_configs + configs
        print(f"  {printable(rel)}: {st.count_ops(doc.get('cache') or {})} ops, {len(doc.get('kernel_configs') or {})} "
              f"kernel configs; {new} timed choices and {configs} kernel configs new here")
    print(f"imported {len(docs)} keys from {path} (exported {manifest.get('created')}) into {store}: "
          f"{total_new} timed choices and {total_configs} kernel configs were new")
    return 0
