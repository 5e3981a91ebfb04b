#!/usr/bin/env bash
# The C fast lanes' tests under AddressSanitizer and UndefinedBehaviorSanitizer: the
# extension is rebuilt with -fsanitize=address,undefined into a scratch copy of the
# package, and tests/test_fastlane.py runs against that copy (any report fails the run).
#
#   bash scripts/sanitize_fastlane.sh        (by hand: not a .ci/run step, for its time)
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "no C compiler: the fast lane is not built, nothing to sanitize"
    exit 0
fi
asan=$("$CC" -print-file-name=libasan.so)
if [ ! -e "$asan" ]; then
    echo "this compiler has no AddressSanitizer runtime: skipped"
    exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r logpipe tests pyproject.toml "$scratch/"
ln -s "$PWD/sample_logs" "$scratch/sample_logs"
find "$scratch/logpipe" -name '_fastlane*.so' -delete
include=$(python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$(python -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
for engine in sglang vllm; do
    "$CC" -shared -fPIC -O1 -g -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer \
        -fsanitize=address,undefined -fno-sanitize-recover=all -I"$include" \
        "logpipe/engines/$engine/_fastlane.c" \
        -o "$scratch/logpipe/engines/$engine/_fastlane$suffix"
done
cd "$scratch"
export LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
python -c "import sys, logpipe.engines.sglang._fastlane as m, logpipe.engines.vllm._fastlane as v; \
assert m.__file__.startswith(sys.argv[1]) and v.__file__.startswith(sys.argv[1])" "$scratch"
python -m pytest -p no:cacheprovider -n 0 tests/test_fastlane.py tests/test_vllm_fastlane.py
