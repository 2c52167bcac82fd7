#!/usr/bin/env bash
# libgdrapi: GDRCopy's top-level Makefile, `lib` + `lib_install` targets (v2.5.1). Only the
# user-space library and headers; the gdrdrv kernel module is a host prerequisite.
set -euo pipefail
make -j"${JOBS:-1}" lib
# lib_install: installs src/libgdrapi.so.<major>.<minor>, the .so.<major> and .so links, and
# include/*.h. prefix= on the command line overrides the Makefile's /usr/local.
make lib_install prefix="$PREFIX" DESTDIR=
