#!/usr/bin/env bash
# Issues #20/#21's 16-core checks as one prepared script for the lent device (results go to RESULTS.md).
#
# The device image has numpy, scipy, pyarrow and pandas but not duckdb, cryptography or dp-accounting, and
# reaches no network: carry wheels. Here, once, in the repository root:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl duckdb==2.0.1 cryptography==50.0.2 cffi==2.1.1 \
#     pycparser==3.12 dp-accounting==0.6.0 dm-tree==0.1.10                      # 29 MB
# Then one device call (carry [".whl"], timeout_s 600): a session's device time is 15 minutes in all, machine start
# included, so `all` runs the parts in order of need inside one call, each cut to the time left before DEADLINE
# seconds (default 540) and skipped when under a minute is left:
#   bash benchmarks/device_check.sh all        # speed, aggregate, sweep (below), in that order
# or one part per call:
#   bash benchmarks/device_check.sh speed      # ~250 s: 100M rows, 16 threads, × floor per key type
#   bash benchmarks/device_check.sh aggregate  # ~260 s: aggregate vs select at 100M inside 2 GB, its statements'
#                                              # CPU / wall, then a 10M-key user
#   bash benchmarks/device_check.sh sweep      # ~200 s: 10M rows at 16 8 4 2 1 threads
#   bash benchmarks/device_check.sh profile    # ~200 s: aggregate vs select (weighted_gaussian, 100M, 2 GB), then
#                                              # profile_aggregate.py's statements (CPU / wall), 2 runs each
#   bash benchmarks/device_check.sh ratios     # ~300 s: aggregate / select for dpsips, mad, mad2r, keys="threshold"
#                                              # (against count_gaussian) at 100M inside 2 GB,
#                                              # then weighted_gaussian and adaptive_sips without a memory limit
#                                              # (RATIO_ALGOS, UNLIMITED_ALGOS pick others)
#   bash benchmarks/device_check.sh recheck    # ~170 s: the two bars left open, on a few minutes of budget: aggregate vs
#                                              # select (weighted_gaussian, 100M, 2 GB), then VARCHAR mad at 100M, 3 runs
# Outputs (markdown tables, plots) land in $OUT (the device tool's folder) or the folder given second.
# KEYS (default "bigint varchar") picks key types; ROWS_BIG / ROWS shrink the tables for a local smoke run.
set -uo pipefail
part=${1:?usage: device_check.sh all|speed|aggregate|sweep|profile|ratios|recheck [outdir]}
out=${2:-${OUT:-/tmp/device_check}}
mkdir -p "$out"
py=${PYTHON:-python3}
keys=${KEYS:-bigint varchar}
rows_big=${ROWS_BIG:-100000000}
rows=${ROWS:-10000000}
algos="weighted_gaussian mad dpsips mad2r adaptive_sips"
if [ "$part" = all ]; then            # each part in its own run of this script, on the time left
  start=$SECONDS; deadline=${DEADLINE:-540}
  for p in speed aggregate sweep; do DEADLINE=$((deadline - (SECONDS - start))) bash "$0" "$p" "$out"; done
  exit 0
fi

if [ -d .whl ]; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=${PYTHONPATH:-}:$PWD
fi
export PYTHONUNBUFFERED=1
{ echo "nproc $(nproc); $($py --version); duckdb $($py -c 'import duckdb; print(duckdb.__version__)')"
  lscpu | grep 'Model name'; git log -1 --format='code %h %s' 2>/dev/null
  # the device's copy of .git can lag the working tree it copies: name the code by its files too
  echo "sources $(find duckdp sql -type f \( -name '*.py' -o -name '*.sql' \) | sort | xargs cat | sha1sum | cut -c1-12)"
} | tee "$out/machine.txt"

stamp() { echo "== $1 $(date -u +%H:%M:%S)"; }
start=$SECONDS
deadline=${DEADLINE:-100000}
# limit N: N seconds, or what is left before the deadline (0 when under a minute is left: the step is skipped)
limit() { local left=$((deadline - (SECONDS - start))); if [ "$left" -lt 60 ]; then echo 0
          elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi; }
run() { local t; t=$(limit "$1"); shift
        if [ "$t" -eq 0 ]; then echo "skipped (deadline): $*"; else timeout "$t" "$@"; fi; }
case $part in
  speed)
    stamp speed
    # shellcheck disable=SC2086  # word lists on purpose
    run 300 $py benchmarks/bench_speed.py --rows "$rows_big" --repeat 1 --threads 16 --key-type $keys \
      --algos $algos --plot "$out/speed_big.png" 2>&1 | tee "$out/speed_big.txt" ;;
  aggregate)
    stamp aggregate
    db=$(mktemp -d)/big.duckdb
    run 240 $py benchmarks/bench_large.py --rows "$rows_big" --memory-limit 2GB --threads 16 --aggregate \
      --algos weighted_gaussian adaptive_sips --db "$db" 2>&1 | tee "$out/aggregate_big.txt"
    stamp profile        # which of aggregate(weighted_gaussian)'s statements keep 16 threads busy (CPU / wall)
    [ -f "$db" ] && run 90 $py benchmarks/profile_aggregate.py "$db" --threads 16 --memory-limit 2GB --repeat 1 \
      --algos weighted_gaussian 2>&1 | tee "$out/aggregate_profile.txt"
    rm -rf "$(dirname "$db")"
    stamp skewed
    # shellcheck disable=SC2086
    run 120 $py benchmarks/bench_speed.py --rows "$rows" --repeat 1 --threads 16 \
      --skewed-user-keys 0 "$rows" --algos weighted_gaussian dpsips mad2r adaptive_sips \
      --plot "$out/skewed.png" 2>&1 | tee "$out/skewed.txt" ;;
  sweep)
    stamp sweep
    # shellcheck disable=SC2086
    run 300 $py benchmarks/bench_speed.py --rows "$rows" --repeat 1 --threads 16 8 4 2 1 --key-type $keys \
      --algos $algos --plot "$out/sweep.png" 2>&1 | tee "$out/sweep.txt" ;;
  profile)
    stamp profile        # aggregate vs select (weighted_gaussian, 100M, 2 GB): totals, then each statement's CPU / wall
    db=$(mktemp -d)/big.duckdb
    run 120 $py benchmarks/bench_large.py --rows "$rows_big" --memory-limit 2GB --threads 16 --aggregate \
      --algos weighted_gaussian --db "$db" 2>&1 | tee "$out/aggregate_big.txt"
    [ -f "$db" ] && run 150 $py benchmarks/profile_aggregate.py "$db" --threads 16 --memory-limit 2GB --repeat 2 \
      --algos weighted_gaussian 2>&1 | tee "$out/aggregate_profile.txt"
    rm -rf "$(dirname "$db")" ;;
  ratios)
    stamp ratios         # aggregate / select per mechanism at 100M inside 2 GB, then without a memory limit
    db=$(mktemp -d)/big.duckdb
    # shellcheck disable=SC2086  # word lists on purpose
    run 300 $py benchmarks/bench_large.py --rows "$rows_big" --memory-limit 2GB --threads 16 --aggregate \
      --algos ${RATIO_ALGOS:-dpsips mad mad2r threshold} --db "$db" 2>&1 | tee "$out/aggregate_ratios_2gb.txt"
    stamp unlimited
    # shellcheck disable=SC2086
    [ -f "$db" ] && run 120 $py benchmarks/bench_large.py --memory-limit 100GB --threads 16 --aggregate \
      --algos ${UNLIMITED_ALGOS:-weighted_gaussian adaptive_sips} --db "$db" 2>&1 \
      | tee "$out/aggregate_ratios_unlimited.txt"
    rm -rf "$(dirname "$db")" ;;
  recheck)
    stamp aggregate
    run 110 $py benchmarks/bench_large.py --rows "$rows_big" --memory-limit 2GB --threads 16 --aggregate \
      --algos weighted_gaussian 2>&1 | tee "$out/aggregate_recheck.txt"
    stamp varchar
    run 150 $py benchmarks/bench_speed.py --rows "$rows_big" --repeat 3 --threads 16 --key-type varchar \
      --algos weighted_gaussian mad --plot "$out/varchar_recheck.png" 2>&1 | tee "$out/varchar_recheck.txt" ;;
  *) echo "unknown part: $part (all | speed | aggregate | sweep | profile | ratios | recheck)" >&2; exit 2 ;;
esac
stamp done
