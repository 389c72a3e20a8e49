#!/usr/bin/env bash
# The fuzz targets of fuzz/fuzz_targets/:
#   scripts/fuzz.sh [seconds] [target...]   fuzz each target for a bounded time (60 s by default)
#   scripts/fuzz.sh keep [target...]        add to fuzz/seeds/<target> the inputs of the working
#                                           corpus that reach code the seeds do not
#   scripts/fuzz.sh replay [target...]      run each target once over its kept inputs (.ci/run)
# Without targets: all of them.
#
# Fuzzing uses cargo-fuzz (`cargo install cargo-fuzz`); its nightly compiler flags are unlocked
# on a stable toolchain by RUSTC_BOOTSTRAP=1. The kept inputs (fuzz/seeds/<target>/ and
# fuzz/regressions/<target>/, committed) are read; what fuzzing finds is written to the working
# corpus fuzz/corpus/<target>/ and crashes to fuzz/artifacts/<target>/ (neither committed).
# Reproduce a crash with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run -a <target> fuzz/artifacts/<target>/<file>
# and, once fixed, keep it in fuzz/regressions/<target>/.
#
# replay needs neither cargo-fuzz nor a nightly flag: a plain build (profile `ci` of
# fuzz/Cargo.toml) links libFuzzer without coverage instrumentation, and libFuzzer given files
# runs each once. It builds into $CARGO_TARGET_DIR (the repository's target/ by default) for the
# host target, where the main crate's `cargo test --profile ci --target <host>` has already built
# every dependency.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(jsonl_example masking_collate render_template render_compiled engines_agree template_corpus plan_agrees)

mode=fuzz
seconds=60
case "${1:-}" in
  replay | keep)
    mode=$1
    shift
    ;;
  '' | *[!0-9]*) ;;
  *)
    seconds=$1
    shift
    ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${all_targets[@]}"); fi
for target in "${targets[@]}"; do
  if [ ! -f "fuzz/fuzz_targets/$target.rs" ]; then
    echo "no fuzz target $target (fuzz/fuzz_targets/$target.rs)" >&2
    exit 2
  fi
done

# Every committed input of a target, one per line.
kept_inputs() {
  find "fuzz/seeds/$1" "fuzz/regressions/$1" -type f 2>/dev/null | sort
}

if [ "$mode" = replay ]; then
  host="$(rustc -vV | sed -n 's/^host: //p')"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
  cargo fmt --check --manifest-path fuzz/Cargo.toml
  cargo build --manifest-path fuzz/Cargo.toml --profile ci --target "$host" --bins
  log=$(mktemp)
  status=0
  for target in "${targets[@]}"; do
    mapfile -t inputs < <(kept_inputs "$target")
    if [ ${#inputs[@]} -eq 0 ]; then
      echo "$target: no kept inputs in fuzz/seeds/$target or fuzz/regressions/$target" >&2
      status=1
      continue
    fi
    started=$SECONDS
    if "$CARGO_TARGET_DIR/$host/ci/$target" -timeout=60 -rss_limit_mb=2048 "${inputs[@]}" >"$log" 2>&1; then
      echo "$target: ${#inputs[@]} inputs replayed in $((SECONDS - started)) s"
    else
      # libFuzzer names each input before running it: the last one named failed.
      grep -v '^Executed ' "$log" | tail -n 40 >&2
      echo "$target: FAILED on $(grep '^Running: ' "$log" | tail -n 1 | cut -c10-)" >&2
      status=1
    fi
  done
  rm -f "$log"
  exit $status
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
  exit 1
fi
export RUSTC_BOOTSTRAP=1

status=0
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target" "fuzz/regressions/$target"
  if [ "$mode" = keep ]; then
    echo "== $target: keeping new coverage from fuzz/corpus/$target in fuzz/seeds/$target"
    # -merge=1 adds to the first directory the inputs of the others that reach new code, the
    # smallest first; -use_counters=0 counts the code reached, not how often: far fewer files.
    cargo fuzz run -a "$target" "fuzz/seeds/$target" "fuzz/corpus/$target" -- -merge=1 \
      -use_counters=0 -rss_limit_mb=2048 -max_len=8192 || status=1
    continue
  fi
  echo "== $target: ${seconds}s"
  # -a: debug assertions and overflow checks. -rss_limit_mb bounds a single input's memory;
  # -max_len keeps inputs small enough to run fast, and -len_control=0 allows that length from the
  # start (libFuzzer otherwise lengthens inputs as runs accumulate, and the targets that run a few
  # hundred inputs a second stayed under 40 bytes in ten minutes). The first corpus directory
  # receives what is found; the committed inputs are read as seeds.
  if ! cargo fuzz run -a "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" "fuzz/regressions/$target" \
      -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=8192 -len_control=0 \
      -print_final_stats=1; then
    status=1
  fi
done
exit $status
