"""The dynamic section of an ELF shared object: NEEDED, RPATH, RUNPATH, SONAME — read directly,
so doctor needs no binutils (recipes/deep-ep/verify_install.py shells out to readelf) and reads only
the few pages it needs of a 100 MB extension."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Optional

from deepep_env.base.readfile import open_regular

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29


@dataclass(frozen=True)
class Dynamic:
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    soname: Optional[str]


def _cstr(fh: BinaryIO, offset: int, limit: int = 4096) -> str:
    fh.seek(offset)
    raw = fh.read(limit)
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def _program_headers(fh: BinaryIO) -> Optional[tuple[list[tuple[int, int, int]], tuple[int, int], str]]:
    """The PT_LOAD segments ``(vaddr, offset, filesz)``, the PT_DYNAMIC ``(offset, filesz)`` and the
    dynamic entries' struct format; None when ``fh`` is not an ELF with a dynamic segment."""
    fh.seek(0)
    ident = fh.read(64)
    if len(ident) < 52 or ident[:4] != b"\x7fELF":
        return None
    cls, data = ident[4], ident[5]
    e = "<" if data == 1 else ">"
    if cls == 2:
        phoff = struct.unpack_from(e + "Q", ident, 0x20)[0]
        phentsize, phnum = struct.unpack_from(e + "HH", ident, 0x36)
        ph_fmt, dyn_fmt = e + "IIQQQQQQ", e + "qQ"
    elif cls == 1:
        phoff = struct.unpack_from(e + "I", ident, 0x1C)[0]
        phentsize, phnum = struct.unpack_from(e + "HH", ident, 0x2A)
        ph_fmt, dyn_fmt = e + "IIIIIIII", e + "iI"
    else:
        return None
    if phnum > 4096 or phentsize != struct.calcsize(ph_fmt):   # the ELF size of one header (56, 32): a larger
        return None                                            # one read up to 256 MiB for nothing (issue 52.12)
    fh.seek(phoff)
    table = fh.read(phentsize * phnum)
    if len(table) < phentsize * phnum:
        return None
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dyn: Optional[tuple[int, int]] = None
    for i in range(phnum):
        f = struct.unpack_from(ph_fmt, table, i * phentsize)
        if cls == 2:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = f[:6]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = f[:5]
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dyn = (p_offset, p_filesz)
    return None if dyn is None else (loads, dyn, dyn_fmt)


def _dynamic_entries(fh: BinaryIO, dyn: tuple[int, int], dyn_fmt: str) -> list[tuple[int, int]]:
    """The ``(tag, value)`` entries of the dynamic segment, up to DT_NULL."""
    fh.seek(dyn[0])
    raw = fh.read(min(dyn[1], 1 << 20))
    size = struct.calcsize(dyn_fmt)
    entries = []
    for off in range(0, len(raw) - size + 1, size):
        tag, val = struct.unpack_from(dyn_fmt, raw, off)
        if tag == DT_NULL:
            break
        entries.append((tag, val))
    return entries


def _file_offset(loads: list[tuple[int, int, int]], vaddr: int) -> Optional[int]:
    """Where the loaded address ``vaddr`` lies in the file (the PT_LOAD segment holding it)."""
    for seg_vaddr, offset, filesz in loads:
        if seg_vaddr <= vaddr < seg_vaddr + filesz:
            return offset + (vaddr - seg_vaddr)
    return None


def read_dynamic(fh: BinaryIO) -> Optional[Dynamic]:
    """Parse ``fh`` (a binary file object); None when it is not an ELF with a dynamic section."""
    try:
        headers = _program_headers(fh)
        if headers is None:
            return None
        loads, dyn, dyn_fmt = headers
        entries = _dynamic_entries(fh, dyn, dyn_fmt)
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        str_off = None if strtab is None else _file_offset(loads, strtab)
        if str_off is None:
            return None

        def s(v: int) -> str:
            return _cstr(fh, str_off + v)

        def paths(tag: int) -> tuple[str, ...]:
            out: list[str] = []
            for t, v in entries:
                if t == tag:
                    out.extend(p for p in s(v).split(":") if p)
            return tuple(out)

        soname = next((s(v) for t, v in entries if t == DT_SONAME), None)
        return Dynamic(
            needed=tuple(s(v) for t, v in entries if t == DT_NEEDED),
            rpath=paths(DT_RPATH),
            runpath=paths(DT_RUNPATH),
            soname=soname,
        )
    except (OSError, struct.error, ValueError):
        return None


def read_dynamic_path(path: str) -> Optional[Dynamic]:
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            return read_dynamic(fh)
    except OSError:
        return None
