#!/usr/bin/env bash
# Everything torque-async needs on a fresh Debian/Ubuntu machine: the OpenGL libraries for the
# video tests (installed when run as root with apt-get), then the package and its test extras
# (which include the mpi extra: mpi4py and the MPICH wheel with its mpiexec) into a virtual
# environment, .venv here, made on first use (the machine's own Python is left as it was).
# `. .venv/bin/activate` puts torque-async on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    # the OpenGL packages are the ones the video tests name when a library is missing
    gl=$(sed -n "s/^INSTALL = 'apt-get install \(.*\)'$/\1/p" workers/gl_context.py)
    [ -n "$gl" ] || { echo "setup.sh: no INSTALL line in workers/gl_context.py" >&2; exit 1; }
    need=()
    for pkg in $gl gcc; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
venv=$PWD/.venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
# the MPI tests run the mpiexec that the mpich wheel (the mpi extra) put beside this Python
scripts=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
[ -x "$scripts/mpiexec" ] || { echo "setup.sh: no mpiexec in $scripts (the mpi extra)" >&2; exit 1; }
