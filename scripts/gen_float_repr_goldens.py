#!/usr/bin/env python3
"""Python's spelling of floats, the ground truth of `json.dumps` / `tojson` and `{{ x }}`.

Regenerate (from the repo root; the standard library only):

    python3 scripts/gen_float_repr_goldens.py

Writes __test__/fixtures/float_repr.json: [hex of the double's bits, repr(x)] pairs for seeded
doubles of every kind: random bit patterns, decimals of a few digits at many scales, and
dyadic fractions whose exact decimal value ends in a 5 one digit past the shortest spelling
(where two shortest spellings are equally near and Python takes the even one). Replayed by
`json_dumps::tests` (Rust), so the tests never need Python.
"""
import json
import math
import random
import struct
from pathlib import Path

rng = random.Random(20261204)
values = []
while len(values) < 1200:
    x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
    if math.isfinite(x):
        values.append(x)
for _ in range(1200):
    values.append(rng.randint(-10**6, 10**6) / 10 ** rng.randint(0, 9) * 10 ** rng.randint(-30, 30))
ties = 0
while ties < 1200:
    # k / 2^m has an exact decimal expansion ending in 5; keep those where repr had a choice.
    x = rng.randint(1, 2**53) / 2 ** rng.randint(1, 60) * rng.choice([1, -1])
    shortest = repr(x)
    exact = format(abs(x), ".40e").split("e")[0].replace(".", "").rstrip("0")
    digits = shortest.lstrip("-").split("e")[0].replace(".", "").strip("0")
    if len(exact) == len(digits) + 1 and exact.endswith("5"):
        values.append(x)
        ties += 1
pairs = [[struct.pack(">d", x).hex(), repr(x)] for x in values]
out = Path(__file__).resolve().parent.parent / "__test__" / "fixtures" / "float_repr.json"
body = ",\n".join(json.dumps(p) for p in pairs)
out.write_text('{"generator": "scripts/gen_float_repr_goldens.py", "pairs": [\n' + body + "\n]}\n")
print(f"{len(pairs)} pairs ({ties} ties) -> {out}")
