#!/usr/bin/env bash
# Fuzzes every parser that takes outside input, each for a bounded time, and prints the
# executions run per target. Needs the nightly toolchain; installs cargo-fuzz if missing.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# A crash or hang leaves its input in fuzz/artifacts/<target>/ and makes the script fail;
# each one found becomes a regression test beside the parser it broke.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "fuzz.sh: SECONDS_PER_TARGET must be a positive whole number, got '$secs'" >&2
  exit 2
fi
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi
# No sanitizer: the code is safe Rust; panics, overflows (debug assertions on) and hangs
# are what we look for, and builds stay fast.
(cd fuzz && cargo +nightly fuzz build -s none -a)
failed=0
printf '%-16s %12s %8s  %s\n' TARGET EXECUTIONS SECONDS RESULT
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  log="fuzz/artifacts/$t/last-run.log"
  start=$(date +%s)
  if (cd fuzz && cargo +nightly fuzz run -s none -a "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
    result=ok
  else
    result="FOUND: see $log and fuzz/artifacts/$t/"
    failed=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  printf '%-16s %12s %8s  %s\n' "$t" "${runs:-?}" "$(( $(date +%s) - start ))" "$result"
done
exit $failed
