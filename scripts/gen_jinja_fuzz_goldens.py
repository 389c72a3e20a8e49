#!/usr/bin/env python3
"""Differential template fuzzing goldens: small random templates over the constructs chat
templates use, rendered by Python's jinja2 exactly as transformers 5 sets it up for chat
templates (its own `_cached_compile_jinja_template`: ImmutableSandboxedEnvironment with
`trim_blocks`, `lstrip_blocks`, loop controls, the generation extension, its `tojson`,
`raise_exception`, `strftime_now`, `dict` and `namespace`).

Regenerate (from the repo root) with the transformers 5.x environment of the corpus goldens:

    python3 -m venv /tmp/venv-corpus
    /tmp/venv-corpus/bin/pip install -r scripts/requirements-corpus.txt
    /tmp/venv-corpus/bin/python scripts/gen_jinja_fuzz_goldens.py

Writes __test__/fixtures/jinja_fuzz/cases.json.gz (replayed by tests/jinja_fuzz_goldens.rs
through the interpreter and the render plan). The generator is seeded: the same jinja2 and
transformers give the same cases (the addresses of printed Python objects aside).

The fixture holds `contexts` (the template variables: `messages` and the keyword arguments of the
render, shared by many cases) and `cases`, each with its template `t`, the index `c` of its
context, `add_generation_prompt` as `g`, and either the rendered text `out` or the exception `err`
(`type`, and `message` as `str()` of it: what a user of transformers sees), and `varies` where a
second Python process renders the case otherwise (a text that reads an object's address). Templates
that do not compile in Python are not kept.

How values survive JSON: integers beyond 64 bits are written as {"$bigint": "<digits>"} (the test
turns them back into integers); floats keep their decimal point or exponent (`1.0`), so serde_json
reads them back as floats.
"""

import collections
import concurrent.futures
import copy
import gzip
import json
import multiprocessing
import os
import random
import re
import signal
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers.utils.chat_template_utils import _cached_compile_jinja_template  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# JINJA_FUZZ_SEED and JINJA_FUZZ_OUT draw a fresh set elsewhere (replayed with JINJA_FUZZ_CASES,
# see CONTRIBUTING); the committed fixture is seed 53's.
OUT = Path(os.environ.get("JINJA_FUZZ_OUT", REPO / "__test__" / "fixtures" / "jinja_fuzz" / "cases.json.gz"))
SEED = int(os.environ.get("JINJA_FUZZ_SEED", "53"))
CASES = 24_000
# Cases of the extended grammar (more str methods, jinja2's web filters, groupby, attr,
# dict.fromkeys), drawn after the others from a generator of their own, so that adding them
# left the first CASES as they were.
EXTENDED_CASES = 6_000
# Cases of the construct grammar (`ConstructGen`), drawn last from a generator of their own for
# the same reason.
CONSTRUCT_CASES = 6_000
CONTEXTS = 240
I64 = 2**63

# ---------------------------------------------------------------------------------------------
# Contexts
# ---------------------------------------------------------------------------------------------

STRINGS = [
    "", "a", "user", "assistant", " pad ", "x,y", "a, b ,c", "é🙂", "\n", "Hello World",
    "hello world", "<think>", "</think>", "ß", "ǅungla", "İstanbul", "  two  words \t",
    "MiXeD cAsE", "{}-{}", "%s!", "1", "3.5", "ab" * 3, "a\u001fb ", "ὈΔΥΣΣΕΎΣ", "x'y\"z",
    "tab\tsep", "ﬁne", "123abc", "-7",
]
KEYS = ["role", "content", "items", "keys", "values", "get", "name", "type", "a", "b", "B", "z"]
FLOATS = [0.1, 1.0, 2.5, -0.5, 1e-07, 1e21, -0.0, 3.14159, 1e16, 123456789.125, 0.5, 1.5,
          2.675, 100.0, 1e300]
BIG_INTS = [2**53 + 1, 2**63 - 1, 2**64 - 1, 2**64 + 3, -(2**63), -(2**70) - 5, 10**30]


def scalar(rng):
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.2:
        return rng.random() < 0.5
    if r < 0.4:
        return rng.randint(-5, 12)
    if r < 0.5:
        return rng.choice(FLOATS)
    if r < 0.53:
        return rng.choice(BIG_INTS)
    return rng.choice(STRINGS)


def value(rng, depth=0):
    r = rng.random()
    if depth >= 2 or r < 0.6:
        return scalar(rng)
    if r < 0.8:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def message(rng):
    m = {"role": rng.choice(["user", "assistant", "system", "tool"])}
    r = rng.random()
    if r < 0.7:
        m["content"] = rng.choice(STRINGS)
    elif r < 0.8:
        m["content"] = None
    elif r < 0.9:
        m["content"] = [{"type": "text", "text": rng.choice(STRINGS)} for _ in range(rng.randint(1, 2))]
    else:
        m["content"] = value(rng, 1)
    if rng.random() < 0.2:
        m["tool_calls"] = [{"function": {"name": rng.choice(["f", "get", "é"]),
                                         "arguments": {rng.choice(KEYS): scalar(rng)}}}]
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        m[rng.choice(KEYS)] = value(rng, 1)
    return m


def context(rng):
    ctx = {
        "messages": [message(rng) for _ in range(rng.choice([0, 1, 2, 2, 3, 3, 4]))],
        "s": rng.choice(STRINGS),
        "n": rng.choice([rng.randint(-3, 9), rng.randint(0, 4), rng.choice(BIG_INTS)] if rng.random() < 0.1
                        else [rng.randint(-3, 9), rng.randint(0, 4)]),
        "f": rng.choice(FLOATS),
        "l": [scalar(rng) for _ in range(rng.randint(0, 5))],
        "nums": [rng.choice([rng.randint(-4, 9), rng.choice(FLOATS[:12])]) for _ in range(rng.randint(0, 5))],
        "strs": [rng.choice(STRINGS) for _ in range(rng.randint(0, 5))],
        "d": {rng.choice(KEYS): value(rng, 1) for _ in range(rng.randint(0, 5))},
        "x": value(rng),
        "y": value(rng),
        "flag": rng.random() < 0.5,
        "big": rng.choice(BIG_INTS),
    }
    if rng.random() < 0.3:
        ctx["tools"] = [{"type": "function", "function": {"name": rng.choice(["f", "g"]),
                                                          "parameters": {"x": value(rng, 1)}}}]
    for name in list(ctx):
        # Some variables missing now and then: templates see them undefined.
        if name not in ("messages", "s", "d") and rng.random() < 0.04:
            del ctx[name]
    return ctx


def to_json(v):
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int):
        return v if -I64 <= v < 2 * I64 else {"$bigint": str(v)}
    if isinstance(v, list):
        return [to_json(x) for x in v]
    return {k: to_json(x) for k, x in v.items()}


# ---------------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------------


def lit(s):
    out = "'"
    for ch in s:
        if ch == "\n":
            out += "\\n"
        elif ch == "\t":
            out += "\\t"
        elif ch in "'\\":
            out += "\\" + ch
        elif ch < " ":
            out += "\\u%04x" % ord(ch)
        else:
            out += ch
    return out + "'"


class Gen:
    """A template of a few constructs. Expressions are mostly typed (a string where a string
    belongs), with an untyped value now and then, so that most cases render and some raise."""

    def __init__(self, rng, extended=False):
        self.rng = rng
        self.extended = extended
        self.scope = {}  # loop and set variables: name -> kind
        self.in_loop = 0
        self.macros = []

    def pick(self, items):
        return self.rng.choice(items)

    def chance(self, p):
        return self.rng.random() < p

    # -- expressions ----------------------------------------------------------------------

    def names_of(self, kind):
        return [n for n, k in self.scope.items() if k == kind]

    def atom(self, kind):
        own = self.names_of(kind)
        if own and self.chance(0.35):
            return self.pick(own)
        if kind == "str":
            return self.pick([lit(self.pick(STRINGS)), lit(self.pick(STRINGS)), "s", "s", "s", "strs[0]",
                              "(messages|first).role", "d.name", "d['a']", "x", "s|trim",
                              "(messages|last)['content']", "z", "(s ~ '')", "n|string", "f|string"])
        if kind == "num":
            return self.pick(["n", "n", "f", str(self.rng.randint(-3, 12)), repr(self.pick(FLOATS[:13])),
                              "big", str(self.pick(BIG_INTS)), "nums|first|default(0)", "l|length",
                              "messages|length", "x", "1_000", "0.1", "3", "2", "f", "n"])
        if kind == "list":
            return self.pick(["l", "nums", "strs", "messages", "[1, 2, 3]", "['b', 'a', 'B']",
                              "[3, 1.5, -2]", "range(3)", "range(1, n if n < 9 else 2)",
                              "s.split(',')", "s.split()", "x", "[]", "d.keys()|list", "strs", "l",
                              "tools", "[none, true, 'x']", "(1, 'a')", "strs", "messages", "nums"])
        if kind == "dict":
            return self.pick(["d", "d", "d", "messages|first", "messages|last", "{'a': 1, 'b': [2]}",
                              "{'items': 1, 'get': 'g'}", "x", "{}", "dict(a=1, b='c')",
                              "(messages|last).tool_calls[0].function", "tools|first", "d"])
        if kind == "bool":
            return self.pick(["flag", "true", "false", "none", "add_generation_prompt", "x", "z"])
        return self.pick(["x", "y", "z", "none", "s", "n", "f", "l", "d", "messages", "big",
                          "messages[0]", "messages[0].content", "d.items", "d.get", "d['items']"])

    def expr(self, kind="any", depth=0):
        if kind == "any":
            kind = self.pick(["str", "str", "str", "num", "num", "list", "dict", "bool", "raw"])
        if depth > 2 or self.chance(0.45):
            return self.atom(kind)
        e = lambda k="any": self.expr(k, depth + 1)  # noqa: E731
        if kind == "str":
            forms = [
                lambda: f"{e('str')} ~ {e()}",
                lambda: f"{e('str')} + {e('str')}",
                lambda: f"({e('str')})|" + self.pick(["trim", "lower", "upper", "capitalize", "title",
                                                       "replace('a', 'A')", "indent(2)", "indent(2, true)",
                                                       "string", "default('dflt')", "d('q', true)",
                                                       "center(9)", "truncate(5)", "first", "last",
                                                       "reverse", "wordcount", "length"]),
                lambda: f"({e('str')})." + self.pick(["strip()", "strip('a ')", "lstrip()", "rstrip('\\n')",
                                                       "upper()", "lower()", "title()", "capitalize()",
                                                       "replace('a', '_')", "split(',')[0]",
                                                       "startswith('a')", "endswith('d')", "count('a')",
                                                       "find('l')", "format(1, 'b')", "splitlines()",
                                                       "isdigit()", "swapcase()", "casefold()", "zfill(4)"]),
                lambda: f"({e('list')})|join" + self.pick(["", "(', ')", "('|')"]),
                lambda: f"({e()})|tojson" + self.pick(["", "", "(indent=2)", "(sort_keys=true)",
                                                       "(ensure_ascii=true)", "(separators=(',', ':'))"]),
                lambda: f"({e()})|string",
                lambda: f"{e('str')}[" + self.pick(["0]", "-1]", "1:]", ":2]", "::-1]", "1:-1]", "::2]"]),
                lambda: f"({e()})|" + self.pick(["first", "last"]),
                lambda: f"'%s-%s'|format({e()}, {e()})",
                lambda: f"{e('str')} if {e('bool')} else {e('str')}",
                lambda: f"{e('str')} if {e('bool')}",
                lambda: f"{e('str')} * 2",
                lambda: f"({e('dict')}).get('name', 'none')",
                lambda: f"({e('dict')})|dictsort|first|last",
            ]
        elif kind == "num":
            forms = [
                lambda: f"{e('num')} " + self.pick(["+", "-", "*", "/", "//", "%"]) + f" {e('num')}",
                lambda: f"({e('num')}) ** " + self.pick(["2", "0", "-1", "0.5"]),
                lambda: f"({e()})|length",
                lambda: f"({e('num')})|" + self.pick(["abs", "round", "round(1)", "round(2, 'floor')",
                                                       "int", "float", "string|length"]),
                lambda: f"({e()})|int",
                lambda: f"({e()})|float",
                lambda: f"({e('list')})|" + self.pick(["sum", "max", "min", "length", "count"]),
                lambda: f"-{e('num')}",
                lambda: f"({e('str')}).count('a')",
                lambda: "loop.index" if self.in_loop else "n",
                lambda: f"({e('num')}) if {e('bool')} else 0",
            ]
        elif kind == "list":
            forms = [
                lambda: f"({e('list')})|" + self.pick(["reverse|list", "sort|list", "list", "unique|list",
                                                        "sort(reverse=true)", "sort(attribute='role')",
                                                        "map('upper')|list", "map(attribute='role')|list",
                                                        "select|list", "select('odd')|list",
                                                        "select('string')|list", "reject('none')|list",
                                                        "selectattr('role', 'equalto', 'user')|list",
                                                        "rejectattr('content')|list", "map('string')|list",
                                                        "batch(2)|list", "slice(2)|list"]),
                lambda: f"({e('list')})|" + self.pick(["map('upper')", "select", "reject", "selectattr('role')"]),
                lambda: f"{e('list')} + {e('list')}",
                lambda: f"{e('list')}[" + self.pick(["1:]", ":2]", "::-1]", "-2:]", "1:3]"]),
                lambda: f"({e('dict')})|" + self.pick(["dictsort", "items|list", "list"]),
                lambda: f"({e('dict')})." + self.pick(["items()|list", "keys()|list", "values()|list"]),
                lambda: f"({e('str')}).split(" + self.pick(["", "','", "' '", "'a', 1"]) + ")",
                lambda: f"({e('str')})|list",
                lambda: f"[{e()}, {e()}]",
            ]
        elif kind == "dict":
            forms = [
                lambda: f"{{'k': {e()}, {e('str')}: 1}}",
                lambda: f"dict({e('dict')}, z={e()})" if self.chance(0.3) else f"({e('list')})[0]",
                lambda: f"({e('dict')})['" + self.pick(KEYS) + "']",
                lambda: f"({e('dict')})." + self.pick(KEYS),
                lambda: f"({e('dict')}).get('" + self.pick(KEYS) + "')",
                lambda: f"({e('dict')})|default({{}})",
            ]
        elif kind == "bool":
            forms = [
                lambda: f"{e()} " + self.pick(["==", "!=", "<", ">", "<=", ">="]) + f" {e()}",
                lambda: f"{e('num')} " + self.pick(["<", ">=", "=="]) + f" {e('num')}",
                lambda: f"{e()} " + self.pick(["in", "not in"]) + f" {e(self.pick(['list', 'str', 'dict']))}",
                lambda: f"{e()} is " + self.pick(["", "not "]) + self.pick([
                    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean",
                    "mapping", "iterable", "sequence", "true", "false", "odd", "even", "divisibleby(3)",
                    "equalto 'user'", "eq 1", "sameas none", "in ['a', 'user']", "lower", "upper",
                    "callable", "escaped", "gt 1", "le 2", "ne 'x'"]),
                lambda: f"not {e()}",
                lambda: f"{e()} and {e()}",
                lambda: f"{e()} or {e()}",
                lambda: f"({e('str')}).startswith(" + self.pick(["'a'", "('a', 'u')", "'<'"]) + ")",
                lambda: f"({e('list')})|" + self.pick(["length > 1", "first is string"]),
            ]
        else:  # raw: anything at all
            forms = [lambda: self.atom("raw"), lambda: f"{e()} ~ {e()}", lambda: f"{e()} + {e()}",
                     lambda: f"{e()}[0]", lambda: f"({e()}).items()", lambda: f"({e()})|items",
                     lambda: f"{e()} is iterable", lambda: f"({e()})|length"]
        if self.extended:
            forms = forms + self.extended_forms(kind, e)
        return self.pick(self.weighted(forms, kind, e))()

    def weighted(self, forms, kind, e):
        """The forms an expression of `kind` is drawn from (the construct grammar adds its own)."""
        return forms

    def extended_forms(self, kind, e):
        """The extended grammar's forms of an expression of `kind`."""
        if kind == "str":
            return [
                lambda: f"({e('str')})." + self.pick([
                    "rsplit(None, 1)[0]", "rsplit(',', 1)|last", "partition(',')[2]",
                    "rpartition(' ')[0]", "center(9, '*')", "ljust(6, '.')", "rjust(5)",
                    "removeprefix('a')", "removesuffix('d')", "expandtabs(4)", "index('a')|string",
                    "rfind('l', 0, 4)|string", "find('a', 1)|string", "partition('')[0]"]),
                lambda: f"({e()})|" + self.pick(["forceescape", "urlencode"]),
                lambda: f"({e('dict')})|" + self.pick(["xmlattr", "xmlattr(false)", "urlencode"]),
                lambda: f"({e('num')})|filesizeformat" + self.pick(["", "(true)"]),
                lambda: f"({e('dict')})|attr('" + self.pick(KEYS) + "')",
                lambda: "'\\N{BULLET}' ~ " + e('str'),
            ]
        if kind == "num":
            return [
                lambda: f"({e('str')}).count('a', " + self.pick(["1", "-2", "0, 3", "none, 2"]) + ")",
                lambda: f"({e('str')})." + self.pick(["index('a')", "rindex('a')", "find('b', -3)"]),
            ]
        if kind == "list":
            return [
                lambda: f"({e('list')})|groupby('role')|list",
                lambda: f"({e('list')})|groupby(0)|map(attribute='list')|list",
                lambda: f"({e('str')})." + self.pick(["partition(' ')", "rpartition('a')", "rsplit()",
                                                       "rsplit(' ', 1)"]),
            ]
        if kind == "dict":
            return [
                lambda: f"dict.fromkeys({e('list')}" + self.pick([")", ", 0)", ", none)"]),
                lambda: f"({e('dict')}).copy()",
            ]
        if kind == "bool":
            return [
                lambda: f"({e('str')})." + self.pick(["istitle()", "isdecimal()", "isidentifier()"]),
            ]
        return []

    # -- statements -----------------------------------------------------------------------

    def ws(self):
        return "-" if self.chance(0.2) else ""

    def text(self):
        return self.pick(["text", "\n", "  ", "<|im_start|>", " | ", "\n  ", "é", "[", "]", ": "])

    def output(self):
        l, r = self.ws(), self.ws()
        return f"{{{{{l} {self.expr(self.pick(['str', 'str', 'num', 'any']))} {r}}}}}"

    def block(self, depth, count=None):
        out = []
        for _ in range(count or self.rng.randint(1, 3)):
            out.append(self.stmt(depth))
        return "".join(out)

    def body_outside_loop(self, depth):
        # A call block's body is a function and a set block's is captured: `break` cannot reach
        # the loop around them.
        saved, self.in_loop = self.in_loop, 0
        body = self.block(depth + 1, 1)
        self.in_loop = saved
        return body

    def stmt(self, depth):
        choices = ["text", "output", "output", "output", "set"]
        if depth < 3:
            choices += ["if", "if", "for", "for"]
        if self.in_loop:
            choices += ["loopvar", "loopvar", "control"]
        if self.macros:
            choices += ["call"]
        if depth < 2:
            choices += ["setblock", "ns"]
        kind = self.pick(choices)
        nl = "\n" if self.chance(0.3) else ""
        ind = "  " if nl and self.chance(0.5) else ""
        if kind == "text":
            return self.text()
        if kind == "output":
            return self.output()
        if kind == "set":
            name = self.pick(["v", "w"])
            k = self.pick(["str", "num", "list", "any"])
            self.scope[name] = k if k != "any" else "raw"
            return f"{ind}{{%{self.ws()} set {name} = {self.expr(k)} {self.ws()}%}}{nl}"
        if kind == "setblock":
            self.scope["sb"] = "str"
            return f"{{% set sb %}}{self.body_outside_loop(depth)}{{% endset %}}{{{{ sb|length }}}}"
        if kind == "ns":
            self.scope["ns.acc"] = "str"
            self.scope["ns.count"] = "num"
            return ("{% set ns = namespace(acc='', count=0) %}"
                    f"{{% for it in {self.expr('list')} %}}{{% set ns.acc = ns.acc ~ it %}}"
                    "{% set ns.count = ns.count + 1 %}{% endfor %}{{ ns.count }}:{{ ns.acc }}")
        if kind == "if":
            saved = dict(self.scope)
            out = f"{ind}{{%{self.ws()} if {self.expr('bool')} {self.ws()}%}}{nl}{self.block(depth + 1)}"
            if self.chance(0.35):
                out += f"{ind}{{%{self.ws()} elif {self.expr('bool')} {self.ws()}%}}{nl}{self.block(depth + 1)}"
            if self.chance(0.5):
                out += f"{ind}{{%{self.ws()} else {self.ws()}%}}{nl}{self.block(depth + 1)}"
            # A name set in one branch is undefined when another runs.
            self.scope = saved
            return out + f"{ind}{{%{self.ws()} endif {self.ws()}%}}{nl}"
        if kind == "for":
            r = self.rng.random()
            saved = dict(self.scope)
            if r < 0.3:
                target, it = "m", self.pick(["messages", "messages[1:]", "messages|reverse",
                                              "messages|selectattr('role', 'equalto', 'user')"])
                self.scope["m"] = "dict"
                self.scope["m.content"] = "str"
                self.scope["m.role"] = "str"
            elif r < 0.45:
                target, it = "k, val", self.pick(["d.items()", "d|dictsort", "d|items", "{'a': 1}.items()",
                                                  "messages[0].items()", "x.items()"])
                self.scope["k"] = "str"
                self.scope["val"] = "raw"
            else:
                target = "it"
                it = self.expr(self.pick(["list", "list", "list", "str", "dict", "any"]))
                self.scope["it"] = self.pick(["str", "num", "raw"])
            cond = f" if {self.expr('bool', 1)}" if self.chance(0.2) else ""
            self.in_loop += 1
            body = self.block(depth + 1)
            self.in_loop -= 1
            out = f"{ind}{{%{self.ws()} for {target} in {it}{cond} {self.ws()}%}}{nl}{body}"
            if self.chance(0.2):
                out += f"{{% else %}}{self.block(depth + 1, 1)}"
            self.scope = saved
            return out + f"{ind}{{%{self.ws()} endfor {self.ws()}%}}{nl}"
        if kind == "loopvar":
            var = self.pick(["loop.index", "loop.index0", "loop.revindex", "loop.revindex0", "loop.first",
                             "loop.last", "loop.length", "loop.previtem", "loop.nextitem",
                             "loop.cycle('odd', 'even')", "loop.depth", "loop.changed(it)",
                             "loop.previtem is defined", "loop.nextitem is undefined"])
            return f"{{{{ {var} }}}}"
        if kind == "control":
            return f"{{% if {self.expr('bool', 1)} %}}{{% {self.pick(['break', 'continue'])} %}}{{% endif %}}"
        if kind == "call":
            name = self.pick(self.macros)
            args = self.pick(["", f"{self.expr()}", f"{self.expr()}, {self.expr()}", f"b={self.expr()}",
                              f"{self.expr()}, c=1" if self.chance(0.2) else ""])
            if name == "wrap" or self.chance(0.05):
                return f"{{% call {name}({args}) %}}{self.body_outside_loop(depth)}{{% endcall %}}"
            return f"{{{{ {name}({args}) }}}}"
        raise AssertionError(kind)

    def template(self):
        head = ""
        if self.chance(0.3):
            self.macros.append("f")
            head += self.pick([
                "{% macro f(a, b='B') %}[{{ a }}|{{ b }}]{% endmacro %}",
                "{% macro f(a, b=none) -%}\n  <{{ a }}{% if b is not none %}/{{ b }}{% endif %}>\n{%- endmacro %}",
                "{% macro f(a='x', b=[1, 2]) %}{{ a ~ b|length }}{% endmacro %}",
                "{% macro f(a) %}{% for i in a %}{{ i }},{% endfor %}{% endmacro %}",
            ])
        if self.chance(0.15):
            self.macros.append("wrap")
            head += self.pick([
                "{% macro wrap(a='') %}<{{ caller() }}{{ a }}>{% endmacro %}",
                "{% macro wrap(a=1, b=2) %}{{ a + b }}{{ caller()|trim }}{% endmacro %}",
            ])
        body = self.block(0, self.rng.randint(1, 3))
        if self.chance(0.1):
            body += "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
        if self.chance(0.05):
            body = "{% if not messages %}{{ raise_exception('no messages: ' ~ s) }}{% endif %}" + body
        return head + body


class ConstructGen(Gen):
    """The construct grammar: the extended grammar, with most expressions and many statements drawn
    from constructs the others reach rarely or not at all. Filters with keyword arguments and
    their fill values, `map` and `select` with arguments, integer and float conversion of strings,
    `%`-formatting with tuples and dicts, string, list and None coercions in `~`, `+` and `*`,
    comparison chains, `in` across types, slices with negative and None steps, dict literals with
    repeated keys, Unicode case mapping; macros with `varargs`, `kwargs` and `caller` arguments,
    `call` blocks with parameters, recursive loops with `loop(...)` and `loop.depth`,
    `loop.cycle`, `loop.changed`, the items around a filtered loop's item, `namespace` updates
    inside loops, `set` with unpacking, `with`, `filter` blocks, `raw`, comments, and whitespace
    control next to text of spaces."""

    TEXTS = ["", "a", "Don't stop", "o'neil's x-ray", "ß", "ﬁne straße", "İI", "ǆ dž", "0x1A", " 42 ",
             "-7", "3.5", "1e3", "1_000", "inf", "nan", "abc", "  a  b  ", "x,y,,z", "%", "ΣΑΣ",
             "hello world foo bar", "<b>&amp;</b>", "é🙂", "\t tab", "a-b_c d.e"]

    def __init__(self, rng):
        super().__init__(rng, extended=True)

    def text_lit(self):
        return lit(self.pick(self.TEXTS))

    def weighted(self, forms, kind, e):
        own = self.construct_forms(kind, e)
        if own and self.chance(0.65):
            return own
        return forms

    def construct_forms(self, kind, e):
        if kind == "str":
            return [
                lambda: f"({e('list')})|join(" + self.pick(["attribute='role'", "', ', attribute='content'",
                                                             "attribute=0", "d=', '"]) + ")",
                lambda: "(" + self.pick(self.PRINTED) + ")"
                        + self.pick(["|string", "|string|length", " ~ ''", "|tojson", "|lower"]),
                lambda: self.pick(["'%s and %s'", "'%5s|%-5s'", "'%r, %s'", "'%d%%'", "'%s'"])
                        + f" % ({e()}, {e()})",
                lambda: self.pick(["'%d'", "'%.2f'", "'%x'", "'%05.1f'", "'%+d'", "'%s'", "'%i'", "'%e'"])
                        + f" % {e('num')}",
                lambda: f"'%(a)s-%(b)r' % {{'a': {e()}, 'b': {e()}}}",
                lambda: f"({e('str')})|format({e()})",
                lambda: f"({e('str')})|truncate(" + self.pick(["3", "5, true", "5, false, '…'", "4, true, '', 0",
                                                              "length=6, end='>'", "10, leeway=0",
                                                              "2, killwords=true"]) + ")",
                lambda: f"({e()})|default(" + self.pick(["'dflt', true", "'dflt', boolean=true",
                                                          "boolean=true", "none", "default_value='v'"]) + ")",
                lambda: f"({self.pick(self.NESTED)})|tojson" + self.pick(["", "(indent=1)", "(sort_keys=true)",
                                                                          "(indent=2, sort_keys=true)"]),
                lambda: f"{e('str')} ~ {e(self.pick(['num', 'bool', 'list', 'dict']))}",
                lambda: f"{e(self.pick(['str', 'list']))} * {e('num')}",
                lambda: f"{self.pick(['2', 'n', 'true', '-1', '0'])} * {e('str')}",
                lambda: f"{e('str')} + {e(self.pick(['num', 'bool', 'list']))}",
                lambda: f"({self.text_lit()})." + self.pick([
                    "upper()", "lower()", "title()", "capitalize()", "swapcase()", "casefold()",
                    "strip('a ')", "strip('.,x')", "lstrip('0x')", "rstrip(' 2')", "split(',', 1)|join('/')",
                    "split(none, 1)|last", "rsplit(',', 1)[0]", "replace('a', 'A', 1)", "center(7, '-')",
                    "zfill(5)", "title()|length", "upper()|length", "lower()|list|length"]),
                lambda: f"({self.text_lit()})|" + self.pick(["upper", "lower", "title", "capitalize",
                                                              "wordcount|string", "trim", "center(8)",
                                                              "reverse", "striptags", "escape", "e",
                                                              "indent(2, first=true)", "indent('> ')",
                                                              "wordwrap(5)", "list|join('.')"]),
                lambda: f"{e('str')}[" + self.pick(["::-2]", "none:none:-1]", "-1:0:-1]", "5:1]", "::none]",
                                                     ":-1:2]", "-3::]", "1:none]", "::0]", "-100:100]"]),
                lambda: f"({e('dict')}).get({e('str')}, {e()})",
                lambda: f"({e('dict')}).get('" + self.pick(KEYS) + "', " + self.pick(["'none'", "0", "[]"]) + ")",
                lambda: f"({self.pick(self.DICTS)})|" + self.pick(["tojson", "string", "list|join(',')",
                                                                   "items|list|string", "dictsort|string",
                                                                   "dictsort(by='value')|string"]),
                lambda: f"({e()})|" + self.pick(["string", "pprint", "trim"]),
            ]
        if kind == "num":
            return [
                lambda: f"({e('list')})|sum(" + self.pick(["start=10", "attribute='a'", "attribute='a', start=1.5",
                                                            "start=-1", "attribute='role'"]) + ")",
                lambda: f"({e('list')})|" + self.pick(["min", "max"]) + "(" + self.pick([
                    "attribute='a'", "case_sensitive=true", "attribute='role'", ""]) + ")",
                lambda: f"({e('num')})|round(" + self.pick(["1, 'ceil'", "0, 'common'", "2, 'floor'",
                                                             "method='ceil'", "precision=1", "-1", "1, 'up'"]) + ")",
                lambda: f"({self.text_lit()})|int" + self.pick(["", "(base=16)", "(0, 16)", "(base=2)",
                                                                 "(base=8)", "(-1)", "(default=5)", "(0, base=0)"]),
                lambda: lit(self.pick(["0x1A", "0b101", "0o17", "012", "1_0", " 7 ", "+3", "-0x10", "4.7", "ff"]))
                        + "|int" + self.pick(["", "(base=16)", "(0, 0)", "(base=2)", "(0, 8)"]),
                lambda: f"({self.text_lit()})|float" + self.pick(["", "(1.5)", "(default=-1)"]),
                lambda: f"({e(self.pick(['num', 'bool', 'str']))})|" + self.pick(["int", "float", "abs"]),
                lambda: f"({e(self.pick(['dict', 'str', 'list']))})|length",
                lambda: f"({self.pick(self.DICTS)})|length",
                lambda: f"{e('num')} " + self.pick(["//", "%", "/", "**"]) + " " + self.pick(["0", "0.0", "-2", "3"]),
                lambda: f"{e('bool')} + {e('num')}",
                lambda: f"{e('num')} * {e('bool')}",
            ]
        if kind == "list":
            return [
                lambda: f"({e('dict')})|dictsort(" + self.pick(["by='value'", "by='value', reverse=true",
                                                                 "true", "false, 'value'", "reverse=true",
                                                                 "case_sensitive=true"]) + ")",
                lambda: f"({e('list')})|sort(" + self.pick(["attribute='a,b'", "attribute='role,content'",
                                                             "case_sensitive=true", "true, true",
                                                             "attribute='0'", "reverse=true, attribute='a'"]) + ")",
                lambda: f"({e('list')})|unique(" + self.pick(["case_sensitive=true", "attribute='role'",
                                                               "true", ""]) + ")|list",
                lambda: f"({e('list')})|" + self.pick(["batch(2, 'x')", "batch(3, none)", "slice(3, 0)",
                                                        "slice(2, 'f')", "batch(1)", "slice(4)"]) + "|list",
                lambda: f"({e('list')})|map(" + self.pick(["'round', 1", "'default', 'x'", "'replace', 'a', 'b'",
                                                            "'int'", "'truncate', 3", "'abs'", "'string'",
                                                            "'lower'", "'join', '-'", "'length'", "'tojson'",
                                                            "attribute='a', default='?'", "'first'"]) + ")|list",
                lambda: f"({e('list')})|" + self.pick(["select", "reject"]) + "(" + self.pick([
                    "'gt', 1", "'in', [1, 2, 'a']", "'divisibleby', 2", "'equalto', 'a'", "'ne', none",
                    "'sameas', true", "'string'", "'number'", "'defined'", "'lt', 3"]) + ")|list",
                lambda: f"({e('list')})|selectattr(" + self.pick(["'a'", "'a', 'defined'", "'role', 'in', ['user']",
                                                                   "'content', 'string'", "'a', 'gt', 0"]) + ")|list",
                lambda: f"{e('list')} * " + self.pick(["2", "0", "-1", "n", "true"]),
                lambda: f"{e('list')}[" + self.pick(["::-2]", "none:none:-1]", "-1:0:-1]", "5:1]", "::none]",
                                                     ":-1:2]", "::0]", "-100:100]"]) + "",
                lambda: f"({self.text_lit()})." + self.pick(["split()", "split(',')", "split(none, 1)",
                                                              "split(',', -1)", "rsplit(none, 1)", "splitlines()",
                                                              "split(' ', 0)", "partition('-')|list"]),
                lambda: f"({self.pick(self.DICTS)})|" + self.pick(["list", "items|list", "dictsort"]),
                lambda: f"({self.pick(self.DICTS)})." + self.pick(["keys()|list", "values()|list", "items()|list"]),
                lambda: f"({self.pick(self.TREES)})|map(attribute='name')|list",
            ]
        if kind == "dict":
            return [
                lambda: self.pick(self.DICTS),
                lambda: f"{{{e('str')}: {e()}, 'a': {e()}}}",
                lambda: f"dict({e('dict')})",
            ]
        if kind == "bool":
            return [
                lambda: f"{e('num')} " + self.pick(["<", "<=", "=="]) + f" {e('num')} " + self.pick(["<", "<=", "!="])
                        + f" {e('num')}",
                lambda: f"{e()} == {e()} == {e()}",
                lambda: self.pick(["1", "0", "n", "f"]) + f" < {e()} < " + self.pick(["5", "f", "'b'"]),
                lambda: self.pick(["1", "'a'", "none", "true", "1.0", "'ab'", "['a']", "('a', )"]) + " "
                        + self.pick(["in", "not in"]) + " "
                        + self.pick(["'abc'", "[1, 2, 'a']", "{'a': 1, 1: 2}", "(1, 'a')", "s", "l", "d",
                                     "strs", "messages", "[[ 'a' ]]", "range(3)", "x", "none"]),
                lambda: f"{e()} is " + self.pick(["", "not "]) + self.pick([
                    "sameas true", "sameas " + e(), "divisibleby 2", "divisibleby(0)", "escaped", "lower",
                    "upper", "boolean", "float", "integer", "sequence", "callable", "defined", "none",
                    "mapping", "number", "string", "filter", "test", "ge 1", "lt 'b'", "greaterthan 0",
                    "lessthan 2", "in d", "in s", "eq none"]),
                lambda: f"({self.text_lit()})." + self.pick(["startswith(('a', 'D'))", "endswith(('p', 'e'))",
                                                              "startswith('o', 1)", "startswith(())",
                                                              "endswith('', 3)", "isupper()", "islower()",
                                                              "isspace()", "isalpha()", "isalnum()", "isnumeric()"]),
                lambda: f"{e()} is " + self.pick(["defined", "undefined"]) + f" and {e()}",
            ]
        return [
            lambda: f"{e()} ~ {e()}",
            lambda: f"{e()} + {e()}",
            lambda: f"{e()} * {e()}",
            lambda: f"({e()})[" + self.pick(["0", "-1", "::-1", "none", "'a'", "1:"]) + "]",
        ]

    PRINTED = ["-0.0", "1e100", "1e16", "0.1 + 0.2", "2 ** 70", "-(2 ** 64)", "1.0", "10 ** 20 / 3", "1 / 3",
               "7 // -2", "-7 % 3", "2.5e-5", "none", "true", "[1.0, none, true]", "(1, )", "{'a': -0.0}"]
    NESTED = ["{'a': [1, none, 'é'], 'b': {'c': 1.5, 'd': -0.0}}", "[none, true, false, 1e21, 'x\\ny']",
              "{'z': 1, 'a': {'y': [], 'b': {}}}", "['🙂', '\\u00e9', '<&>', \"'\"]", "d", "messages", "x",
              "{'k': (1, 2), 'n': 2 ** 70}", "[0.1, 1e-07, 100.0, 1.5e300]"]
    DICTS = ["{'b': 1, 'a': 2, 'b': 3}", "{'z': none, 'a': 1, 'M': 2}", "{1: 'one', 'a': 2}",
             "{'a': 1, 'b': 'B', 'a': 'again'}", "{}", "{'x': {'a': 1}, 'y': [1, 2]}",
             "{true: 'yes', 1: 'one'}", "{'B': 2, 'a': 1, 'b': 3, 'A': 0}", "{(1, 2): 'pair'}",
             "{'role': 'user', 'content': 'hi'}", "{'a': 3, 'b': 1, 'c': 2}"]
    TREES = ["[{'name': 'a', 'children': [{'name': 'b', 'children': [{'name': 'c'}]}, {'name': 'd'}]}]",
             "[{'name': 'x', 'children': []}, {'name': 'y', 'children': [{'name': 'z', 'children': none}]}]",
             "[{'name': 1, 'children': [{'name': 2, 'children': [{'name': 3, 'children': [{'name': 4}]}]}]}]",
             "[{'name': 'p'}, {'name': 'q', 'children': 'rs'}]", "messages", "[]"]

    def stmt(self, depth):
        if depth < 3 and self.chance(0.35):
            return self.construct_stmt(depth)
        return super().stmt(depth)

    def construct_stmt(self, depth):
        kinds = ["recursive", "unpack", "with", "filter", "raw", "nsloop", "forpairs", "spaces", "comment",
                 "raise", "loopmore"]
        if self.macros:
            kinds += ["callmacro", "callmacro"]
        kind = self.pick(kinds)
        if kind == "recursive":
            inner = self.pick(["{{ it.name }}", "{{ loop.depth }}:{{ it.name }}", "{{ loop.depth0 }}{{ loop.index }}",
                               "{{ it.name ~ (loop.last and '.' or ',') }}", "{{ loop.cycle('<', '>') }}",
                               "{{ it }}"])
            more = self.pick(["{% if it.children %}[{{ loop(it.children) }}]{% endif %}",
                              "{{ loop(it.children or []) }}", "{% if it.children is iterable %}"
                              "{{ loop(it.children)|trim }}{% endif %}", "({{ loop(it.children)|length }})",
                              "{% if loop.depth < 2 %}{{ loop(it.children) }}{% endif %}"])
            cond = self.pick(["", "", " if it.name != 'd'", " if it is mapping"])
            return f"{{% for it in {self.pick(self.TREES)}{cond} recursive %}}{inner}{more}{{% endfor %}}"
        if kind == "unpack":
            source = self.pick(["1, 2", "[1, 2]", "(s, n)", "'ab'", "d.items()|first", "[1, 2, 3]", "x",
                                "s.split(',', 1)", "s.partition(' ')[::2]", "none", "(messages|first).items()|first"])
            self.scope["a"] = "raw"
            self.scope["b"] = "raw"
            return f"{{% set a, b = {source} %}}{{{{ a }}}}/{{{{ b }}}}"
        if kind == "with":
            saved = dict(self.scope)
            binding = self.pick([f"v = {self.expr('str')}", f"v = {self.expr('list')}, w = v",
                                 f"v = {self.expr()}, w = {self.expr('num')}"])
            self.scope["v"] = "raw"
            self.scope["w"] = "raw"
            body = self.block(depth + 1)
            self.scope = saved
            tail = self.pick(["", "{{ v is defined }}"])
            return f"{{% with {binding} %}}{body}{{% endwith %}}{tail}"
        if kind == "filter":
            f = self.pick(["upper", "trim", "replace('a', 'b')", "indent(2)", "title", "center(20)",
                           "truncate(8)", "wordcount", "lower|replace(' ', '_')", "list|join(',')", "length",
                           "e", "striptags", "format(1)", "reverse"])
            return f"{{% filter {f} %}}{self.body_outside_loop(depth)}{{% endfilter %}}"
        if kind == "raw":
            return self.pick(["{% raw %}{{ x }}{% if %}{% endraw %}", "{%- raw -%}  {{ a }}  {%- endraw %}",
                              "  {% raw %}\n{# c #}\n{% endraw %}\n", "{% raw %}{% endfor %}{%+ endraw %}"])
        if kind == "nsloop":
            self.scope["ns.acc"] = "raw"
            init = self.pick(["namespace(acc=[], n=0)", "namespace(acc='', n=0, seen=none)",
                              "namespace(acc=none, n=n)", "namespace(d={'k': 0}, acc=0, n=0)"])
            update = self.pick(["{% set ns.acc = ns.acc + [it] %}", "{% set ns.acc = ns.acc ~ it %}",
                                "{% if loop.first %}{% set ns.acc = it %}{% endif %}",
                                "{% set ns.acc = ns.acc or it %}", "{% set ns.n = ns.n + loop.index %}",
                                "{% if it is string %}{% set ns.seen = it %}{% endif %}",
                                "{% set ns.acc = [ns.acc, it]|max %}"])
            inner = self.pick(["", "{% for j in range(2) %}{% set ns.n = ns.n + j %}{% endfor %}",
                               "{% if ns.n > 2 %}{% break %}{% endif %}", "{{ ns.n }}"])
            show = self.pick(["{{ ns.acc }}|{{ ns.n }}", "{{ ns.acc|tojson }}", "{{ ns.seen }}{{ ns.missing }}",
                              "{{ ns }}", "{{ ns.n }}", "{{ ns.d }}"])
            return (f"{{% set ns = {init} %}}{{% for it in {self.expr('list')} %}}{update}{inner}"
                    f"{{% endfor %}}{show}")
        if kind == "forpairs":
            saved = dict(self.scope)
            self.scope["k"] = "raw"
            self.scope["val"] = "raw"
            source = self.pick(["d|dictsort(by='value')", "[[1, 2], [3, 4]]", "[(1, 2), 'ab', 'cde']",
                                "messages|map('dictsort')|map('first')", "zip", "d.items()|list|reverse",
                                f"{self.pick(self.DICTS)}.items()", "[[1], [2, 3]]", "strs"])
            self.in_loop += 1
            body = self.block(depth + 1)
            self.in_loop -= 1
            self.scope = saved
            return f"{{% for k, val in {source} %}}{body}{{% endfor %}}"
        if kind == "spaces":
            return self.pick([
                f"  {{%+ if {self.expr('bool')} %}}x{{% endif %}}",
                f"   {{%- if {self.expr('bool')} -%}}   \n  y {{%- endif %}}  \n",
                "  \n  {%- set q = 1 -%}  \n  z",
                f"\t{{% for i in range(2) %}}\n{{{{ i }}}}  {{%+ endfor %}}\n",
                f"  {{{{- {self.expr('str')} -}}}}  ",
                "{% if true -%}\n   \n{%- endif %}",
                f"\n  {{%+ set q = 2 %}}  {{{{ q }}}}",
                "   {%- raw %} r {% endraw -%}   ",
                "  {%+ if flag -%}  a  {%- else +%}  b  {%+ endif %}  ",
            ])
        if kind == "comment":
            return self.pick(["  {# note #}\n", "{#- x -#}  \n", "  {#- y #}  ", "text {# {{ x }} #}\n",
                              "\n  {# c -#}\n  ", "{# a\nb #}\n"])
        if kind == "raise":
            return (f"{{% if {self.expr('bool')} %}}{{{{ raise_exception("
                    + self.pick(["'bad: ' ~ s", "'role ' ~ (messages|first).role ~ ' is not allowed'",
                                 f"{self.expr('str')}", "'n=%d' % n", "'é🙂\n' ~ x"]) + ") }}{% endif %}")
        if kind == "loopmore":
            saved = dict(self.scope)
            self.scope["it"] = "raw"
            cond = self.pick(["", " if it", " if it is string", " if loop is undefined"])
            body = self.pick(["{{ loop.cycle('a', 'b', 'c') }}", "{{ loop.changed(it) }}",
                              "{{ loop.changed(it is string, 1) }}", "{{ loop.previtem }}|{{ loop.nextitem }}",
                              "{{ loop.previtem is defined }}{{ loop.nextitem is none }}",
                              "{{ loop.revindex }}/{{ loop.length }}{{ loop.last }}",
                              "{{ loop.depth }}{{ loop.depth0 }}", "{{ loop.cycle(*strs) }}",
                              "{{ loop.cycle() }}", "{{ loop.index0 ~ loop }}"])
            self.in_loop += 1
            body += self.block(depth + 1, 1) if self.chance(0.4) else ""
            self.in_loop -= 1
            self.scope = saved
            return f"{{% for it in {self.expr('list')}{cond} %}}{body}{{% endfor %}}"
        if kind == "callmacro":
            name = self.pick(self.macros)
            if name == "each":
                params = self.pick(["(item, i)", "(item)", "()", "(item, i, extra='e')"])
                body = self.pick(["{{ i }}={{ item }};", "{{ item|string|upper }}", "[{{ caller is defined }}]",
                                  "{{ extra }}{{ i }}", "{{ varargs }}"])
                return f"{{% call{params} each({self.expr('list')}) %}}{body}{{% endcall %}}"
            args = self.pick(["", "1", "1, 2, 3", "k=1", "1, k='v', j=none", "*strs", "a=s",
                              "1, **{'k': 2}", f"{self.expr()}, {self.expr()}, q={self.expr()}"])
            if name == "v":
                return f"{{{{ v({args}) }}}}"
            return f"{{% call {name}({args}) %}}{self.body_outside_loop(depth)}{{% endcall %}}"
        raise AssertionError(kind)

    def template(self):
        head = ""
        if self.chance(0.35):
            self.macros.append("v")
            head += self.pick([
                "{% macro v(a) %}{{ a }}|{{ varargs|length }}|{{ kwargs|dictsort }}{% endmacro %}",
                "{% macro v() %}{{ varargs|join(',') }};{{ kwargs|tojson }}{% endmacro %}",
                "{% macro v(a=0, b=1) %}{{ a }}{{ b }}{{ varargs }}{% endmacro %}",
                "{% macro v(a, k=2) %}{{ a ~ k }}{{ kwargs }}{% endmacro %}",
                "{% macro v() %}{{ v.name }}{{ v.arguments|length }}{{ v.catch_kwargs }}{{ varargs|length }}"
                "{% endmacro %}",
            ])
        if self.chance(0.25):
            self.macros.append("each")
            head += self.pick([
                "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}",
                "{% macro each(xs, sep=',') %}{% for x in xs %}{{ caller(x, i=loop.index0) }}"
                "{{ sep if not loop.last }}{% endfor %}{% endmacro %}",
                "{% macro each(xs) %}{{ caller(xs) }}|{{ caller() }}{% endmacro %}",
            ])
        if self.chance(0.2):
            self.macros.append("wrapk")
            head += self.pick([
                "{% macro wrapk(a='') %}<{{ caller() }}{{ a }}{{ kwargs|length }}>{% endmacro %}",
                "{% macro wrapk() %}{{ caller()|upper }}{{ varargs|length }}{% endmacro %}",
            ])
        return head + super().template()


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


class TooSlow(Exception):
    pass


def too_slow(signum, frame):
    raise TooSlow()


def render(template, ctx, add_generation_prompt):
    # A render may change its variables (`indent` of a list appends to it before it raises), and
    # the contexts are shared by many cases: each render gets its own copy, so that no case sees
    # another's changes.
    ctx = copy.deepcopy(ctx)
    kwargs = {k: v for k, v in ctx.items() if k not in ("messages", "tools")}
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        return {"out": template.render(messages=ctx["messages"], tools=ctx.get("tools"), documents=None,
                                       add_generation_prompt=add_generation_prompt, **kwargs)}
    except TooSlow:
        return None
    except Exception as e:  # what apply_chat_template lets through
        return {"err": {"type": type(e).__name__, "message": str(e)}}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def draw(rng, contexts, count, grammar, seen, skipped):
    """`count` cases of a grammar (`grammar(rng)` makes a generator of one template)."""
    cases = []
    while len(cases) < count:
        source = grammar(rng).template()
        if source in seen or len(source) > 600:
            skipped["repeated or long"] += 1
            continue
        try:
            template = _cached_compile_jinja_template(source)
        except (jinja2.TemplateSyntaxError, SyntaxError):
            skipped["syntax"] += 1
            continue
        seen.add(source)
        c = rng.randrange(CONTEXTS)
        g = rng.random() < 0.5
        result = render(template, contexts[c], g)
        if result is None or "out" in result and len(result["out"]) > 2000:
            skipped["slow or long"] += 1
            continue
        case = {"t": source, "c": c, "g": g, **result}
        if varies_here(template, contexts[c], g, result):
            case["varies"] = True
        cases.append(case)
    return cases


def varies_here(template, ctx, add_generation_prompt, result):
    """Whether rendering again, with other objects alive (so that the objects the render makes
    land at other addresses), changes the result, printed addresses aside."""
    held = []
    for size in (3, 17, 61):
        held.append([[] for _ in range(size)] + [object() for _ in range(size)] + [{} for _ in range(size)])
        again = render(template, ctx, add_generation_prompt)
        if again is not None and without_addresses(again) != without_addresses(result):
            return True
    return False


def seeded_contexts(rng):
    """The template variables of the cases: the first draws of the seed's generator."""
    return [context(rng) for _ in range(CONTEXTS)]


def render_again(keys):
    """In a fresh interpreter: the result of each case `(t, c, g)` of `keys` (None where too slow)."""
    signal.signal(signal.SIGALRM, too_slow)
    contexts = seeded_contexts(random.Random(SEED))
    return [render(_cached_compile_jinja_template(t), contexts[c], g) for t, c, g in keys]


ADDRESS = re.compile(r"(0[xX])[0-9a-fA-F]{8,}")


def without_addresses(result):
    """`result` with every printed object address written `0x?`, as the test compares texts."""
    if result is None:
        return None
    if "out" in result:
        return {"out": ADDRESS.sub(r"\1?", result["out"])}
    return {"err": {**result["err"], "message": ADDRESS.sub(r"\1?", result["err"]["message"])}}


def mark_varying(cases):
    """Marks `varies` the cases whose result changes from one Python process to the next, printed
    addresses aside: their text reads the address of an object (`count('a')` of a text that holds
    one) or the order of a set. A second interpreter, with its own addresses and hash seed,
    renders every case again; a case it renders otherwise has no one answer to compare with.
    (`draw` has marked those that change within this process.)"""
    keys = [(c["t"], c["c"], c["g"]) for c in cases]
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        again = pool.submit(render_again, keys).result()
    for case, result in zip(cases, again):
        first = {k: case[k] for k in ("out", "err") if k in case}
        if result is not None and without_addresses(result) != without_addresses(first):
            case["varies"] = True
    return sum(case.get("varies", False) for case in cases)


def main():
    signal.signal(signal.SIGALRM, too_slow)
    rng = random.Random(SEED)
    contexts = seeded_contexts(rng)
    skipped = collections.Counter()
    seen = set()
    cases = draw(rng, contexts, CASES, lambda r: Gen(r), seen, skipped)
    cases += draw(random.Random(SEED + 1), contexts, EXTENDED_CASES, lambda r: Gen(r, True), seen, skipped)
    cases += draw(random.Random(SEED + 2), contexts, CONSTRUCT_CASES, ConstructGen, seen, skipped)
    varying = mark_varying(cases)
    doc = {
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "seed": SEED,
        "contexts": [to_json(ctx) for ctx in contexts],
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(data)
    errors = sum("err" in c for c in cases)
    print(f"{len(cases)} cases ({errors} raise, {varying} vary between processes; not kept: {dict(skipped)}), "
          f"{len(data)} bytes of JSON, "
          f"{OUT.stat().st_size} bytes written to {OUT}")


if __name__ == "__main__":
    main()
