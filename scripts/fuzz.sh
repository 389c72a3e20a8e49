#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (default 60 s each):
#   scripts/fuzz.sh [seconds] [target...]
# cargo-fuzz needs nightly compiler flags; on a stable toolchain RUSTC_BOOTSTRAP=1 unlocks them.
# Crashes land in fuzz/artifacts/<target>/; reproduce one with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
# and, once fixed, keep it as a regression test beside the code it broke.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(jsonl_example masking_collate render_template render_compiled engines_agree template_corpus)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
  exit 1
fi

export RUSTC_BOOTSTRAP=1
# Seed corpora: the repository's own JSONL fixtures for the JSONL target.
mkdir -p fuzz/corpus/jsonl_example
find __test__/fixtures -name '*.jsonl' -size -64k -exec cp {} fuzz/corpus/jsonl_example/ \;

status=0
for target in "${targets[@]}"; do
  echo "== $target: ${seconds}s"
  # -rss_limit_mb bounds a single input's memory; -max_len keeps inputs small enough to run fast.
  if ! cargo fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1; then
    status=1
  fi
done
exit $status
