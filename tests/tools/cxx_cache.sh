#!/bin/sh
# The C++ compiler for the test suite's sweeps (tests/conftest.py sets CXX to this file):
# g++ with a cache of the kernel libraries it builds, keyed by the source's content and the
# command line. Each job compiles in a cache folder of its own (sweeper/record.py, cache_env),
# so without it every test's sweep builds the same kernels again with g++, most of a cold
# CPU compile's time. Inductor still writes and compiles each kernel as in a user's sweep;
# only g++'s work on a source it has built before is read back. A command other than one
# source file to one shared library (the precompiled header, --version) goes to g++ as is.
set -eu
cache=${SWEEPER_TEST_CXX_CACHE:?"SWEEPER_TEST_CXX_CACHE: the folder of built libraries"}
src="" out="" prev=""
for arg in "$@"; do
    case "$arg" in *.cpp) [ -z "$src" ] && src=$arg || { exec g++ "$@"; } ;; esac
    [ "$prev" = "-o" ] && out=$arg
    prev=$arg
done
case "$out" in *.so) ;; *) exec g++ "$@" ;; esac
[ -n "$src" ] || exec g++ "$@"
# the key: the source's bytes and every argument, the source's and the library's own paths
# (a job's cache folder) left out
key=$( { cat "$src"; for arg in "$@"; do
           [ "$arg" = "$src" ] || [ "$arg" = "$out" ] || printf '%s\n' "$arg"; done; } | sha256sum | cut -c1-40)
mkdir -p "$cache"
if [ ! -f "$cache/$key.so" ]; then
    g++ "$@"
    # written beside, then renamed: two jobs building the same kernel at once each see a whole file
    cp "$out" "$cache/$key.so.$$" && mv -f "$cache/$key.so.$$" "$cache/$key.so"
    echo "built $key" >> "$cache/builds.log"  # one short line a build, appended whole
    exit 0
fi
cp "$cache/$key.so" "$out"
echo "read $key" >> "$cache/builds.log"
