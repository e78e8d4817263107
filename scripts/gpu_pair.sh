#!/usr/bin/env bash
# Pair this tree's CUDA kernels against an older revision's on a GPU, in one device call
# (benchmarks/ab.py: ABBA rounds, a process per tree and round, each call synchronised).
#
#   bash scripts/gpu_pair.sh prepare OLD_REV     # here: export OLD_REV into .gpu/old (git-ignored)
#   bash scripts/gpu_pair.sh run CASES [DTYPE]   # on the GPU machine, with .gpu carried
#
# `run` builds this tree's compiled modules once; where OLD_REV's C++/Cython sources are the
# same as this tree's (the usual case for a CUDA change), the old tree borrows them, else it
# builds its own.  Logs go to $OUT (default ./gpu-pair-out).
set -u
cmd=${1:-}
case "$cmd" in
prepare)
    rev=${2:?usage: gpu_pair.sh prepare OLD_REV}
    root=$(git rev-parse --show-toplevel) || exit 1
    cd "$root" || exit 1
    grep -qx "/.gpu/" "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null \
        || echo "/.gpu/" >> "$(git rev-parse --git-common-dir)/info/exclude"
    rm -rf .gpu/old && mkdir -p .gpu/old
    git archive "$rev" | tar -x -C .gpu/old || exit 1
    # Whether the old tree can borrow this tree's compiled modules: the same C++ and Cython.
    if git diff --quiet "$rev" -- _ext setup.py 'convviz/*.pyx' 'convviz/*/*.pyx' 'convviz/*.pxd' \
            'convviz/*.pyi' 'convviz/*/*.pyi' 'convviz/*.cpp'; then
        echo same > .gpu/old/.compiled-as-new
    fi
    echo "exported $rev into .gpu/old ($(du -sh .gpu/old | cut -f1)); carry .gpu on the device call"
    ;;
run)
    cases=${2:?usage: gpu_pair.sh run CASES [DTYPE]}
    dtype=${3:-float32}
    OUT=${OUT:-gpu-pair-out}
    mkdir -p "$OUT"
    export PYTHONUNBUFFERED=1
    PY=${PYTHON:-python3}
    [ -d .gpu/old ] || { echo "no .gpu/old: run 'gpu_pair.sh prepare OLD_REV' first and carry .gpu"; exit 1; }
    CONVVIZ_WERROR=0 timeout 300 $PY setup.py -q build_ext --inplace -j "$(nproc)" > "$OUT/build.log" 2>&1 \
        || { tail -30 "$OUT/build.log"; exit 1; }
    if [ -f .gpu/old/.compiled-as-new ]; then
        find convviz -name "*.so" | while read -r f; do cp "$f" ".gpu/old/$f"; done
    else
        (cd .gpu/old && CONVVIZ_WERROR=0 timeout 300 $PY setup.py -q build_ext --inplace -j "$(nproc)") \
            > "$OUT/build-old.log" 2>&1 || { tail -30 "$OUT/build-old.log"; exit 1; }
    fi
    timeout 400 $PY benchmarks/ab.py .gpu/old . --device gpu --dtype "$dtype" --cases "$cases" 2>&1 \
        | tee "$OUT/pair.log" | grep " ms "
    ;;
*)
    echo "usage: gpu_pair.sh prepare OLD_REV | gpu_pair.sh run CASES [DTYPE]"
    exit 2
    ;;
esac
