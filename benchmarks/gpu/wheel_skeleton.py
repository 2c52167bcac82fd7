#!/usr/bin/env python3
"""Carry a wheel to a machine without network as a small "skeleton".

    make WHEEL SKELETON
        Read the wheel (a zip) and write SKELETON: every byte of the file except the compressed
        payloads of members whose uncompressed content a `pip install` of the same wheel leaves on
        the target.  For each of those members the skeleton records the sha256 of its content and
        the zlib parameters (level, wbits, memLevel, strategy) that recompress it to exactly the
        original stream (checked here, byte for byte).  Members that cannot be rebuilt that way --
        *.dist-info/* (pip rewrites RECORD), *.data/* outside purelib/platlib, directories, other
        compression methods, streams no zlib setting reproduces -- keep their payload inline.

    rebuild SKELETON SITE_PACKAGES OUT.whl [--sha256 HEX]
        On the target: read each such member from SITE_PACKAGES/<member path>, check its sha256,
        recompress it, check CRC-32, compressed size and the compressed stream's sha256, write the
        original byte layout to a temporary file beside OUT.whl, check the whole file's sha256 (the
        skeleton's and --sha256 if given) and only then rename it to OUT.whl.

    info SKELETON
        Print what the skeleton holds.

Any failure: exit status 1 and one line on stderr.  Stdlib only; Python >= 3.10.
The skeleton is gzip'd JSON (binary pieces base64).
"""
from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import zipfile
import zlib

FORMAT = "deepep-env/wheel-skeleton/1"
CHUNK = 1 << 20
PROBE = 1 << 16           # input bytes a candidate setting must reproduce before it is tried in full
LOCAL_SIG = b"PK\x03\x04"


class SkelError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# zlib settings

def _candidates():
    """Settings to try, most likely first (zipfile/Python, Info-ZIP, 7-Zip-ish defaults)."""
    seen = set()
    first = [(6, -15, 8, 0), (9, -15, 8, 0), (6, -15, 9, 0), (9, -15, 9, 0)]
    rest = [(lvl, wb, ml, st)
            for wb in (-15, -14, -13, -12, -11, -10, -9)
            for ml in (8, 9, 7, 6, 5, 4, 3, 2, 1)
            for st in (zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY,
                       zlib.Z_RLE, zlib.Z_FIXED)
            for lvl in (6, 9, 1, 5, 8, 7, 4, 3, 2, 0)]
    for c in first + rest:
        if c not in seen:
            seen.add(c)
            yield c


def _compressor(p):
    level, wbits, mem, strategy = p
    return zlib.compressobj(level, zlib.DEFLATED, wbits, mem, strategy)


def _reproduces(p, raw: bytes, comp: bytes, limit: int | None = None) -> bool:
    """Does setting p turn raw into comp?  With limit: only check the output produced by the
    first `limit` input bytes (a cheap filter; a full check must follow)."""
    c = _compressor(p)
    pos = 0
    end = len(raw) if limit is None else min(limit, len(raw))
    for i in range(0, end, CHUNK) if end else ():
        out = c.compress(raw[i:min(i + CHUNK, end)])
        if out:
            if comp[pos:pos + len(out)] != out:
                return False
            pos += len(out)
    if limit is not None and end < len(raw):
        return True
    out = c.flush()
    return comp[pos:] == out


def find_params(raw: bytes, comp: bytes, hint=None):
    cands = list(_candidates())
    if hint is not None and hint in cands:
        cands.remove(hint)
        cands.insert(0, hint)
    for p in cands:
        if _reproduces(p, raw, comp, PROBE) and _reproduces(p, raw, comp):
            return p
    return None


# ---------------------------------------------------------------------------------------------
# make

def _site_path(name: str):
    """Where pip puts member `name` relative to site-packages, or None if not there verbatim."""
    if name.endswith("/"):
        return None
    top, _, rest = name.partition("/")
    if top.endswith(".dist-info"):
        return None
    if top.endswith(".data"):
        scheme, _, sub = rest.partition("/")
        return sub if scheme in ("purelib", "platlib") and sub else None
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return name


def make(wheel: str, skeleton: str, log=print) -> dict:
    with open(wheel, "rb") as f:
        blob = f.read()
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise SkelError(f"{wheel}: not a zip file ({exc})")
    infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
    segments = []      # ("raw", start, end) | ("member", dict)
    members = []
    cursor = 0
    hint = None
    carried = rebuilt = 0
    for info in infos:
        off = info.header_offset
        if blob[off:off + 4] != LOCAL_SIG:
            raise SkelError(f"{info.filename}: no local header at offset {off}")
        nlen, xlen = struct.unpack("<HH", blob[off + 26:off + 30])
        start = off + 30 + nlen + xlen
        end = start + info.compress_size
        if end > len(blob) or start < cursor:
            raise SkelError(f"{info.filename}: payload out of order or past end of file")
        raw = None
        entry = {"name": info.filename, "size": info.file_size, "csize": info.compress_size,
                 "method": info.compress_type}
        path = _site_path(info.filename)
        reason = None
        params = None
        if path is None:
            reason = "not installed verbatim (dist-info, data, directory)"
        elif info.flag_bits & 0x1:
            reason = "encrypted"
        elif info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            reason = f"compression method {info.compress_type}"
        elif info.compress_size < 64:
            reason = "tiny"
        else:
            raw = zf.read(info)
            comp = blob[start:end]
            if info.compress_type == zipfile.ZIP_STORED:
                if raw != comp:
                    reason = "stored payload differs from content"
            else:
                params = find_params(raw, comp, hint)
                if params is None:
                    reason = "no zlib setting reproduces the stream"
                else:
                    hint = params
        if reason is None:
            entry.update(path=path, sha256=hashlib.sha256(raw).hexdigest(),
                         crc32=info.CRC, csha256=hashlib.sha256(blob[start:end]).hexdigest(),
                         params=list(params) if params else None)
            if start > cursor:
                segments.append(("raw", cursor, start))
            segments.append(("member", entry))
            cursor = end
            rebuilt += info.compress_size
        else:
            entry["inline"] = reason
            carried += info.compress_size
        members.append(entry)
        log(f"{'inline ' if reason else 'rebuild'} {info.filename} {info.compress_size}"
            + (f" ({reason})" if reason else f" params={list(params) if params else 'stored'}"))
    if cursor < len(blob):
        segments.append(("raw", cursor, len(blob)))
    doc = {
        "format": FORMAT,
        "wheel": os.path.basename(wheel),
        "size": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "zlib_version": zlib.ZLIB_RUNTIME_VERSION,
        "python": sys.version.split()[0],
        "segments": [
            {"raw": base64.b64encode(blob[s[1]:s[2]]).decode("ascii")} if s[0] == "raw"
            else {"member": s[1]["name"]}
            for s in segments
        ],
        "members": members,
    }
    data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), 9, mtime=0)
    tmp = skeleton + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, skeleton)
    summary = {"members": len(members),
               "rebuilt": sum(1 for m in members if "inline" not in m),
               "rebuilt_bytes": rebuilt, "inline_bytes": carried,
               "skeleton_bytes": len(data), "sha256": doc["sha256"]}
    log("made " + " ".join(f"{k}={v}" for k, v in summary.items()))
    return summary


# ---------------------------------------------------------------------------------------------
# rebuild

def load(skeleton: str) -> dict:
    try:
        with gzip.open(skeleton, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, EOFError, ValueError) as exc:
        raise SkelError(f"{skeleton}: cannot read skeleton ({exc})")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SkelError(f"{skeleton}: not a wheel skeleton (format {doc.get('format') if isinstance(doc, dict) else doc!r})")
    # common.sh writes the rebuilt wheel to sources/<this name>: a plain file name, never a path (issue 52.12)
    w = doc.get("wheel")
    if not isinstance(w, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\.whl", w):
        raise SkelError(f"{skeleton}: field 'wheel' {w!r} is not a wheel file name (letters, digits, _ . + -, "
                        f"ending .whl, no '/')")
    return doc


def _emit_member(m: dict, site: str, out, whole) -> None:
    name = m["name"]
    src = os.path.join(site, *m["path"].split("/"))
    try:
        f = open(src, "rb")
    except OSError as exc:
        raise SkelError(f"{name}: not readable in {site} ({exc.strerror})")
    with f:
        size = os.fstat(f.fileno()).st_size
        if size != m["size"]:
            raise SkelError(f"{name}: installed file {src} has {size} bytes, the wheel's has {m['size']}")
        h = hashlib.sha256()
        ch = hashlib.sha256()
        crc = 0
        csize = 0
        c = _compressor(tuple(m["params"])) if m["params"] else None
        while True:
            buf = f.read(CHUNK)
            if not buf:
                break
            h.update(buf)
            crc = zlib.crc32(buf, crc)
            o = c.compress(buf) if c else buf
            if o:
                ch.update(o)
                whole.update(o)
                out.write(o)
                csize += len(o)
        if c:
            o = c.flush()
            ch.update(o)
            whole.update(o)
            out.write(o)
            csize += len(o)
    if h.hexdigest() != m["sha256"]:
        raise SkelError(f"{name}: installed file {src} differs from the wheel's "
                        f"(sha256 {h.hexdigest()[:16]}…, expected {m['sha256'][:16]}…)")
    if crc != m["crc32"]:
        raise SkelError(f"{name}: CRC-32 {crc:08x} != {m['crc32']:08x}")
    if csize != m["csize"] or ch.hexdigest() != m["csha256"]:
        raise SkelError(f"{name}: recompressed stream differs ({csize} bytes vs {m['csize']}; "
                        f"zlib {zlib.ZLIB_RUNTIME_VERSION} here, {params_str(m)} "
                        f"made with zlib {_ZLIB_AT_MAKE[0]})")


_ZLIB_AT_MAKE = ["?"]


def params_str(m):
    p = m["params"]
    return "stored" if not p else f"level={p[0]} wbits={p[1]} memLevel={p[2]} strategy={p[3]}"


def rebuild(skeleton: str, site: str, out_path: str, want_sha: str | None = None, log=print) -> str:
    doc = load(skeleton)
    _ZLIB_AT_MAKE[0] = doc.get("zlib_version", "?")
    if not os.path.isdir(site):
        raise SkelError(f"{site}: not a directory")
    members = {m["name"]: m for m in doc["members"]}
    if want_sha and want_sha.lower() != doc["sha256"]:
        raise SkelError(f"--sha256 {want_sha} is not the skeleton's wheel ({doc['sha256']})")
    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix=".wheel-skeleton-", suffix=".part", dir=out_dir)
    whole = hashlib.sha256()
    ok = False
    try:
        with os.fdopen(fd, "wb") as out:
            for seg in doc["segments"]:
                if "raw" in seg:
                    b = base64.b64decode(seg["raw"])
                    whole.update(b)
                    out.write(b)
                else:
                    _emit_member(members[seg["member"]], site, out, whole)
            n = out.tell()
        if n != doc["size"]:
            raise SkelError(f"rebuilt {n} bytes, the wheel has {doc['size']}")
        got = whole.hexdigest()
        if got != doc["sha256"]:
            raise SkelError(f"rebuilt wheel sha256 {got} != {doc['sha256']}")
        os.replace(tmp, out_path)
        ok = True
    finally:
        if not ok:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    log(f"rebuilt {out_path} size={doc['size']} sha256={got}")
    return got


def info(skeleton: str) -> None:
    doc = load(skeleton)
    ms = doc["members"]
    inl = [m for m in ms if "inline" in m]
    print(f"wheel={doc['wheel']} size={doc['size']} sha256={doc['sha256']} "
          f"zlib={doc.get('zlib_version')} members={len(ms)} inline={len(inl)} "
          f"inline_bytes={sum(m['csize'] for m in inl)}")
    for m in ms:
        print(("inline  " + m["inline"]) if "inline" in m else ("rebuild " + params_str(m)), m["name"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="wheel_skeleton.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("make")
    a.add_argument("wheel")
    a.add_argument("skeleton")
    a.add_argument("-q", "--quiet", action="store_true")
    b = sub.add_parser("rebuild")
    b.add_argument("skeleton")
    b.add_argument("site_packages")
    b.add_argument("out")
    b.add_argument("--sha256")
    c = sub.add_parser("info")
    c.add_argument("skeleton")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "make":
            make(args.wheel, args.skeleton,
                 log=(lambda s: None) if args.quiet else print)
            if args.quiet:
                print(f"made {args.skeleton} ({os.path.getsize(args.skeleton)} bytes)")
        elif args.cmd == "rebuild":
            rebuild(args.skeleton, args.site_packages, args.out, args.sha256)
        else:
            info(args.skeleton)
    except SkelError as exc:
        print(f"wheel_skeleton: error: {exc}", file=sys.stderr)
        return 1
    except (OSError, zlib.error, KeyError, ValueError) as exc:
        print(f"wheel_skeleton: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
