"""Peer tokenizers on the texts `bench/peers.js` wrote: HF tokenizers (the id oracle),
fastokens, gigatoken and tiktoken, each timed on text it has not seen ("new", after warming up
on the other half of the texts) and on the same text again ("cached"), one engine per process.
Bench tooling only: `bench/peers.js` makes the Python environment and runs this.

    python bench/peers.py <texts.json> <tokenizer.json> <engine> <threads> [--flat] [--batch-bytes N]
    python bench/peers.py <texts.json> <tokenizer.json> --oracle

Prints one JSON line: {engine, version, new, cached, mismatches} with MB/s, {engine, error}
when the engine cannot load the model, or {engine, none} when `--flat` (the batch call into
one flat buffer) asks for a call the engine does not have. `--batch-bytes N` makes the batch
calls take the texts in consecutive batches of about N bytes, one call after another. `--oracle` writes
the ids HF tokenizers gives every text to <texts.json>.ids.json, which every engine is checked
against.
"""

import array
import json
import os
import sys
import time


def load_engine(name, tokenizer_json):
    """An `encode(texts) -> list of id lists` for one text at a time and for a batch, and a batch
    call into one flat buffer with what turns its result into id lists (None without one)."""
    if name == "tokenizers":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(tokenizer_json)
        one = lambda t: tok.encode(t, add_special_tokens=False).ids
        many = lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)]
        return tokenizers.__version__, one, many, None
    if name == "fastokens":
        import fastokens
        from importlib.metadata import version

        tok = fastokens.Tokenizer.from_file(tokenizer_json)
        one = lambda t: list(tok.encode(t, add_special_tokens=False).ids)
        many = lambda ts: [list(e.ids) for e in tok.encode_batch(ts, add_special_tokens=False)]
        flat = lambda ts: tok.encode_batch_flat(ts, add_special_tokens=False)
        return version("fastokens"), one, many, (flat, unflat)
    if name == "gigatoken":
        import gigatoken
        from importlib.metadata import version

        tok = gigatoken.Tokenizer(tokenizer_json)
        one = lambda t: list(tok.encode(t))
        many = lambda ts: [list(ids) for ids in tok.encode_batch_list(ts)]
        return version("gigatoken"), one, many, None
    if name == "tiktoken":
        import tiktoken
        from importlib.metadata import version

        spec = json.load(open(tokenizer_json, encoding="utf-8"))
        ranks = bytes_ranks(spec)
        pattern = pre_tokenizer_pattern(spec)
        enc = tiktoken.Encoding("peer", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        one = lambda t: enc.encode_ordinary(t)
        many = lambda ts: enc.encode_ordinary_batch(ts, num_threads=int(os.environ.get("RAYON_NUM_THREADS", "1")))
        return version("tiktoken"), one, many, None
    raise SystemExit(f"unknown engine {name}")


def byte_decoder():
    """GPT-2's byte-level alphabet: the printable char that stands for each byte."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = {}
    shifted = 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + shifted)] = b
            shifted += 1
    return chars


def bytes_ranks(spec):
    """tiktoken's mergeable ranks from a byte-level BPE vocabulary (rank = id)."""
    decode = byte_decoder()
    ranks = {}
    for token, rank in spec["model"]["vocab"].items():
        try:
            ranks[bytes(decode[c] for c in token)] = rank
        except KeyError:
            continue
    return ranks


def pre_tokenizer_pattern(spec):
    """The first Split regex of the pre-tokenizer (Qwen's)."""
    pre = spec["pre_tokenizer"]
    steps = pre.get("pretokenizers", [pre])
    for step in steps:
        if step.get("type") == "Split":
            return step["pattern"]["Regex"]
    raise SystemExit("no Split regex in the pre-tokenizer")


def unflat(result):
    """fastokens' flat result: little-endian uint32 ids and uint64 offsets, as id lists."""
    ids, offsets = array.array("I", result[0]), array.array("Q", result[1])
    return [ids[offsets[k] : offsets[k + 1]].tolist() for k in range(len(offsets) - 1)]


def split(texts, size):
    """Consecutive batches of about `size` bytes."""
    batches, batch, bytes_ = [], [], 0
    for t in texts:
        batch.append(t)
        bytes_ += len(t.encode("utf-8"))
        if bytes_ >= size:
            batches.append(batch)
            batch, bytes_ = [], 0
    if batch:
        batches.append(batch)
    return batches


def batched(encode, to_lists):
    """`encode` and `to_lists` over a list of batches, one call a batch."""
    return (
        lambda batches: [encode(b) for b in batches],
        lambda results: [ids for r in results for ids in to_lists(r)],
    )


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main():
    texts_file, tokenizer_json = sys.argv[1:3]
    texts = json.load(open(texts_file, encoding="utf-8"))
    if sys.argv[3] == "--oracle":
        _, one, _, _ = load_engine("tokenizers", tokenizer_json)
        half = len(texts) // 2
        json.dump([one(t) for t in texts[half:]], open(texts_file + ".ids.json", "w"))
        return
    name, threads = sys.argv[3:5]
    # `--flat`: the engine's batch call into one flat buffer, if it has one.
    flat = "--flat" in sys.argv[5:]
    batch_bytes = int(sys.argv[sys.argv.index("--batch-bytes") + 1]) if "--batch-bytes" in sys.argv else None
    half = len(texts) // 2
    warm, fresh = texts[:half], texts[half:]
    mb = sum(len(t.encode("utf-8")) for t in fresh) / 1e6
    try:
        version, one, many, flat_call = load_engine(name, tokenizer_json)
    except Exception as e:  # an engine that cannot read this model is listed as such
        print(json.dumps({"engine": name, "version": "", "error": f"{type(e).__name__}: {e}"[:200]}))
        return
    if flat and flat_call is None:
        print(json.dumps({"engine": name, "version": version, "none": True}))
        return
    encode = (lambda ts: [one(t) for t in ts]) if threads == "1" else many
    to_lists = lambda result: result
    if flat:
        encode, to_lists = flat_call
    if batch_bytes is not None:
        # The texts split before the timing; each batch's result turns into id lists after it.
        warm, fresh = split(warm, batch_bytes), split(fresh, batch_bytes)
        encode, to_lists = batched(encode, to_lists)
    encode(warm)
    new_s, ids = timed(lambda: encode(fresh))
    cached_s, again = timed(lambda: encode(fresh))
    ids, again = to_lists(ids), to_lists(again)
    expected = json.load(open(texts_file + ".ids.json", encoding="utf-8"))
    mismatches = sum(1 for a, b in zip(ids, expected) if list(a) != b)
    mismatches += sum(1 for a, b in zip(again, expected) if list(a) != b)
    mismatches += abs(len(ids) - len(expected)) + abs(len(again) - len(expected))
    print(json.dumps({"engine": name, "version": version, "new": mb / new_s, "cached": mb / cached_s, "mismatches": mismatches}))


if __name__ == "__main__":
    main()
