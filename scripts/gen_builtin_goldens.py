#!/usr/bin/env python3
"""Goldens of the builtins a template may call beyond what the fuzzer generates: Python's str
methods (`text.center(9, '*')`, `text.rsplit(None, 1)`, `text.index('b', 2)`, ...) with typical,
edge and wrong arguments on a set of strings (the template variable `s`), `dict.copy()`, and
jinja2's `forceescape`, `xmlattr`, `urlencode` and `filesizeformat` filters on values of every
kind, `striptags`, `wordwrap` and `urlize` on fixed and seeded random texts (tags, comments and
character references; hyphens, long words, tabs and line breaks; addresses with punctuation and
brackets, emails) with their options and wrong arguments, `indent` on texts ending in each
line break, and `str.format`/`str.format_map` (parsing, numbering, lookups, conversions, each part of
a format spec on values of every type, Markup), rendered by jinja2 exactly as transformers 5 sets it up (`_cached_compile_jinja_template`).

Regenerate (from the repo root) with the transformers 5.x environment of the corpus goldens:

    python3 -m venv /tmp/venv-corpus
    /tmp/venv-corpus/bin/pip install -r scripts/requirements-corpus.txt
    /tmp/venv-corpus/bin/python scripts/gen_builtin_goldens.py

Writes __test__/fixtures/builtins/cases.json (replayed by tests/builtin_goldens.rs): each
case has the template `t`, the string `s`, and the rendered text `out` or the exception `err`
(`type`, and `message` as `str()` of it).
"""

import json
import os
import random
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers.utils.chat_template_utils import _cached_compile_jinja_template  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "__test__" / "fixtures" / "builtins" / "cases.json"

STRINGS = [
    "", "abc", "a b  c ", "  lead and trail  ", "é😀x", "Hello World", "hello world", "ǅungla",
    "A1 b2", "Ab1C", "١٢٣", "½", "²3", "x\ty\tz", "a\nb\tc\r\td", "_id9", "9ab", "ĳ_x", "a-b",
    "a=b=c", "ab ab ab", "\u2003x\u2003y\u2003", "ΣΑΣ Σα", "ABC",
]

CALLS = [
    "center(0)", "center(9)", "center(10, '*')", "center(7, '-')", "center(3, 'ab')",
    "center(True)", "center('x')", "ljust(6)", "ljust(8, '.')", "rjust(6)", "rjust(8, '.')",
    "ljust(4, '')",
    "index('b')", "index('b', 2)", "index('a', -3)", "index('', 1, 0)", "index(1)",
    "rindex('b')", "rindex('b', 0, 5)", "rindex('x')",
    "find('b', 2)", "find('b', -2)", "find('', 5)", "find('', 1, 0)", "find('a', None, 2)",
    "find('b', 1.5)", "rfind('b', 0, 4)", "rfind('', 2)", "rfind('a', -1)",
    "find('a', 10 ** 30)", "find('c', -(10 ** 30))", "rfind('b', 0, 10 ** 30)",
    "count('b', 1)", "count('', 1)", "count('', 99)", "count('a', 0, -1)", "count(' ', None, None)",
    "count('b', 10 ** 30)", "count('b', -(10 ** 30))",
    "startswith('b', 1)", "startswith('a', 1)", "startswith('', 3)", "startswith('', 99)",
    "startswith('a', -(10 ** 30))", "startswith('b', 1, 2)", "startswith(('x', 'b'), 1)",
    "startswith(('b', 1), 1)", "startswith((1, 'b'), 1)", "startswith(['b'], 1)",
    "startswith('a', 'x')", "startswith(1, 0)", "startswith('a', None, None)",
    "endswith('b', 0, 2)", "endswith('c', 0, -1)", "endswith('', 4)", "endswith(('q', 'c'), 1)",
    "endswith('c', 1.0)", "endswith(('c',), 0, 10 ** 30)",
    "partition('=')", "partition(' ')", "partition('')", "partition('zz')", "partition(1)",
    "rpartition('=')", "rpartition(' ')", "rpartition('zz')",
    "rsplit()", "rsplit(None, 1)", "rsplit(None, 0)", "rsplit(' ')", "rsplit(' ', 1)",
    "rsplit('=', 0)", "rsplit('')", "rsplit('ab', 2)", "rsplit(None, -1)",
    "removeprefix('a')", "removeprefix('ab')", "removeprefix('')", "removesuffix('c')",
    "removesuffix(' ')", "removesuffix(3)",
    "expandtabs()", "expandtabs(4)", "expandtabs(0)", "expandtabs(1)", "expandtabs(-2)",
    "istitle()", "isdecimal()", "isidentifier()",
]

VALUES = [
    "s", "none", "true", "0", "1", "-1", "999", "1000", "1023", "1024", "1536", "-0.5", "0.999",
    "1.0", "12345678", "123456789012", "1e15", "1e24", "1e27", "1e300", "-1e300", "2 ** 70",
    "'1e3'", "' 42 '", "'abc'", "[1, 2]", "{'a': 1}", "undefined_name",
]

OTHER_TEMPLATES = [
    "{{ {'a': 1, 'b': [1, 2]}.copy() }}",
    "{% set d = {'k': 'v'} %}{% set e = d.copy() %}{{ e['k'] }}{{ e is mapping }}",
    "{{ {'class': 'x y', 'id': 3, 'skip': none, 'q': '<\"&>', 'p': \"'\", 'l': [1, 'a']}|xmlattr }}",
    "{{ {'a': 1}|xmlattr(false) }}|{{ {}|xmlattr }}|{{ {'k': none}|xmlattr }}",
    "{{ {'a b': 1}|xmlattr }}", "{{ {'a/': 1}|xmlattr }}", "{{ {'a=': 1}|xmlattr }}",
    "{{ {'a>': 1}|xmlattr }}", "{{ {'a\tb': 1}|xmlattr }}", "{{ {1: 2}|xmlattr }}",
    "{{ {'é': 'ü'}|xmlattr }}", "{{ [1]|xmlattr }}", "{{ none|xmlattr }}", "{{ nothing|xmlattr }}",
    "{{ 'a b/c?d=é&x'|urlencode }}", "{{ {'a b': 'c/d', 'e': none, 'n': 1.5}|urlencode }}",
    "{{ [('a', 1), ('b', 'c d')]|urlencode }}", "{{ [['k', 'v']]|urlencode }}", "{{ [1]|urlencode }}",
    "{{ [(1, 2, 3)]|urlencode }}", "{{ [('a',)]|urlencode }}", "{{ 42|urlencode }}",
    "{{ none|urlencode }}", "{{ nothing|urlencode }}", "{{ '~_.-'|urlencode }}", "{{ ''|urlencode }}",
    "{{ 'ab'|urlencode }}", "{{ ['ab']|urlencode }}", "{{ '<a href=\"x\">&</a>'|forceescape }}",
    "{{ 5|forceescape }}", "{{ [1, 'a']|forceescape }}", "{{ none|forceescape }}",
    "{{ nothing|forceescape }}", "{{ {'k': \"'\"}|forceescape }}",
    "{{ [{'r': 'a', 'n': 1}, {'r': 'b', 'n': 2}, {'r': 'a', 'n': 3}]|groupby('r')|list }}",
    "{% for g in [{'r': 'a'}, {'r': 'b'}]|groupby('r') %}{{ g }}|{{ g.grouper }}|{{ g.list }}|{{ g[1] }};{% endfor %}",
    "{{ [[1, 'x'], [2, 'y'], [1, 'z']]|groupby(0)|map(attribute='list')|list }}",
    "{{ ([{'r': 'a'}]|groupby('r')|first)|tojson }}|{{ [([{'r': 'a'}]|groupby('r'))] }}",
    "{% set ns = namespace(items=[]) %}{% set ns.items = ns.items + [1] %}{{ ns.items }}",
    "{% set ns = namespace(keys='k', get=1, values=none) %}{{ ns.keys }}{{ ns.get }}{{ ns.values }}",
    "{% set ns = namespace(a=1) %}{% set ns.b = [2] %}{{ ns }}|{{ [ns] }}",
    "{% set ns = namespace(a=1) %}{{ ns|tojson }}",
    "{% set ns = namespace(items=1) %}{{ ns['items'] }}{{ ns.a is defined }}",
    "{% set ns = namespace(_hidden=1) %}{{ ns._hidden }}",
    "{% set ns = namespace(a=1) %}{% set ns._b = 2 %}{{ ns.a }}",
    "{% set ns = namespace({'_c': 1}) %}{{ 'x' }}",
    "{% set ns = namespace(a_=1, b__c=2) %}{{ ns.a_ }}{{ ns.b__c }}",
    "{{ dict.fromkeys(['a', 'b'], 0) }}|{{ dict.fromkeys('xy') }}|{{ dict(a=1, b=2) }}",
    "{{ {'a': 1}|attr('a') }}|{{ ({'a': 1}|attr('a')) is defined }}|{{ {'a': 1}|attr('items') is defined }}",
    "{{ {'content': 'x'}|attr('content')|length }}",
    "{% set ns = namespace(v=3) %}{{ ns|attr('v') }}",
    "{% for m in [1, 2] %}{{ loop|attr('index') }}{% endfor %}",
    # A template's own `%`: printf-style formatting of a tuple, a mapping, or one value.
    "{{ '%s!' % 'x' }}|{{ '%d-%s' % (1, 'a') }}|{{ '%(a)s/%(b)r' % {'a': 1, 'b': 'x'} }}",
    "{{ 'x' % () }}|{{ 'x' % {} }}|{{ 'x' % [] }}|{{ '%s' % [1, 2] }}|{{ '%s' % none }}",
    "{{ '%%' % () }}|{{ '%.2f%%' % 12.345 }}|{{ '%5s|%-5s|' % ('a', 'b') }}|{{ '%s' % (1,) }}",
    "{{ '%s' % nothing }}|{{ '%x %o %e' % (255, 8, 12345.678) }}|{{ '%s' % {'a': 1}.items() }}",
    "{{ '%s|%s' % ([{'a': 1}]|groupby('a')|first) }}", "{{ '%s %s' % [1, 2] }}",
    "{{ 'x' % 3 }}", "{{ ('ab'|min) % 3 }}", "{{ '%(a)s' % [1] }}", "{{ '%(a)s' % {'b': 1} }}",
    "{{ '%d' % 'x' }}", "{{ '%s %s' % ('a',) }}", "{{ '%' % () }}", "{{ s % () }}",
    # Markup strings (`safe`, `escape`, `forceescape`): `+` escapes the plain side, `%` its
    # arguments, wrapped methods and class-keeping filters give Markup, containers show it.
    "{{ '<' + (s|safe) }}|{{ (s|safe) + '<&>' }}|{{ (s|safe) + \"'\" }}|{{ (s|safe) + ('<'|safe) }}",
    "{{ [s|safe, '<'|e] }}|{{ {'k': '<'|forceescape} }}|{{ ((s|safe),) }}",
    "{{ ('%s|%r'|safe) % ('<', '<') }}|{{ ('%(a)s'|safe) % {'a': '&'} }}|{{ ('%s'|safe) % ('<'|safe) }}",
    "{{ ('%.1s'|safe) % '<b' }}|{{ ('%d-%s'|safe)|format(3, '>') }}|{{ '%s' % ('<'|safe) }}",
    "{{ (s|safe) * 2 + '<' }}|{{ 2 * (s|safe) + '<' }}|{{ (s|safe) ~ '<' + '<' }}",
    "{{ (s|safe).replace('a', '<') }}|{{ (s|safe).upper() + '<' }}|{{ (s|safe).split() }}",
    "{{ (s|safe).strip('a') + '<' }}|{{ (s|safe).center(9, '<') }}|{{ (s|safe).partition(' ') }}",
    "{{ (s|safe).startswith('a') }}|{{ (s|safe).count('a') }}|{{ ('x'|safe).join(['<', '>'|safe]) }}",
    "{{ (s|safe)|trim + '<' }}|{{ (s|safe)|string + '<' }}|{{ (s|safe)|upper + '<' }}",
    "{{ (s|safe)|lower + '<' }}|{{ (s|safe)|capitalize + '<' }}|{{ (s|safe)|title + '<' }}",
    "{{ (s|safe)|center(9) + '<' }}|{{ (s|safe)|indent(2) + '<' }}|{{ (s|safe)|reverse + '<' }}",
    "{{ (s|safe)|truncate(3, true, '<', 0) + '<' }}|{{ (s|safe)|replace('a', 'b') + '<' }}",
    "{{ (s|safe)|first + '<' }}|{{ (s|safe)|list }}|{{ (s|safe)|length }}|{{ (s|safe)[1:] + '<' }}",
    "{{ (s|safe) is string }}|{{ (s|safe) == s }}|{{ (s|safe) in [s] }}|{{ (s|safe)|tojson }}",
    "{{ (s|safe) + 1 }}", "{{ 1 + (s|safe) }}", "{{ [1] + (s|safe) }}", "{{ (s|safe) * 1.5 }}",
    "{{ 'x' * ('y'|safe) }}", "{{ (s|safe) - 'a' }}", "{{ (s|safe) + none }}",
]
# `str.format` and `str.format_map`, which jinja2's sandbox runs through `string.Formatter`:
# parsing, numbering, lookups, conversions and the format-spec mini-language of each type.
FORMAT_TEMPLATES = [
    # Literal braces, and the parser's errors (each raised when the parser reaches it).
    "{{ '{{}}|{{{0}}}|a{{b}}c'.format(1) }}", "{{ '}}{{'.format() }}", "{{ ''.format(1, x=2) }}",
    "{{ '}'.format(1) }}", "{{ 'a}b'.format(1) }}", "{{ '{'.format(1) }}", "{{ 'x{'.format(1) }}",
    "{{ '{0'.format(1) }}", "{{ '{0:'.format(1) }}", "{{ '{0!'.format(1) }}", "{{ '{0!r'.format(1) }}",
    "{{ '{0!rr}'.format(1) }}", "{{ '{0!}'.format(1) }}", "{{ '{0!}x}'.format(1) }}",
    "{{ '{0!:}'.format(1) }}", "{{ '{0!x}'.format(1) }}", "{{ '{0!R}'.format(1) }}",
    "{{ '{a{'.format(1) }}", "{{ '{0[}'.format(1) }}", "{{ '{0:}}'.format(1) }}",
    "{{ '{0:{'.format(1) }}", "{{ '{:>2}{'.format(1) }}", "{{ '{0}}'.format() }}",
    "{{ '{0]x}'.format([1]) }}", "{{ '{0[0]x}'.format([1]) }}", "{{ '{0.}'.format([1]) }}",
    "{{ '{0[]}'.format([1]) }}", "{{ '{.a}'.format([1]) }}", "{{ '{[0]}'.format([1]) }}",
    "{{ '{ 0}'.format(1) }}", "{{ '{0 }'.format(1) }}", "{{ '{99999999999999999999}'.format(1) }}",
    # Numbering: automatic, manual, and switching either way.
    "{{ '{}-{}-{}'.format('a', 2, none) }}", "{{ '{1}{0}{1}'.format('a', 'b') }}",
    "{{ '{} and {!r} {0:>5} {x}'.format(1, 'a', x=3) }}", "{{ '{0}{}'.format(1, 2) }}",
    "{{ '{}{0}'.format(1, 2) }}", "{{ '{}{0[0]}'.format([1], 2) }}", "{{ '{00}|{01}'.format(7, 8) }}",
    "{{ '{3}'.format(1, 2) }}", "{{ '{}'.format() }}", "{{ '{}{}'.format(1) }}",
    "{{ '{x}'.format() }}", "{{ '{x}'.format(1) }}", "{{ '{x}-{y}'.format(x=1) }}",
    "{{ \"{it's}\".format(x=1) }}", "{{ '{x}{y!r}'.format(y='b', x='a') }}", "{{ '{x}{0}'.format(1, x=2) }}",
    # Lookups: jinja2's attribute and item rules inside a field.
    "{{ '{0.a}|{0[a]}|{0.b}|{0[zz]}|'.format({'a': 1}) }}", "{{ '{0.a.b}'.format({'a': {'b': 5}}) }}",
    "{{ '{0[0]}|{0[1][0]}|{0[5]}|{0.x}|'.format([1, [5]]) }}", "{{ '{0[1]}|{0[x]}|'.format('abc') }}",
    "{{ '{0[1]}'.format({'1': 'x', 1: 'y'}) }}", "{{ '{0[1]}'.format({'1': 'x'}) }}",
    "{{ '{0[00]}'.format([7]) }}", "{{ '{0.a}|{0[a]}|'.format(none) }}", "{{ '{0.__class__}|'.format(s) }}",
    "{{ '{0.a.b}'.format({}) }}", "{{ '{0[5][0]}'.format([1]) }}", "{{ '{0.a:>3}'.format({}) }}",
    "{{ '{0.a}'.format(nothing) }}", "{{ '{x[0]}'.format(x=nothing) }}",
    "{% set ns = namespace(a=1) %}{{ '{0.a}|{0.b}|'.format(ns) }}",
    "{{ '{0[key]}|{0.key}'.format({'key': 'v'}) }}", "{{ '{m[k]}'.format(m={'k': [1, 2]}) }}",
    # Conversions.
    "{{ '{!s}|{!r}|{!a}'.format(none, 'é', 'é') }}", "{{ '{!r:>8}|{!s:^9}|{!a:*<6}'.format('x', none, 'é') }}",
    "{{ '{!a}|{!r}|{!s}'.format(['é'], {'k': \"it's\"}, (1,)) }}", "{{ '{0!r}|{0!s}|{0!a}'.format(1.5) }}",
    "{{ '{0!r}|{0!s}|'.format(nothing) }}", "{{ '{0!r:.3}'.format('abcdef') }}",
    # Nested fields inside the spec.
    "{{ '{:{}}'.format(1, 2, 3) }}", "{{ '{0:{1}}|{0:{2}}'.format(3, '>4', '<4') }}",
    "{{ '{:>{w}.{p}f}'.format(3.14159, w=9, p=2) }}", "{{ '{:{}{}}'.format('a', '>', 3) }}",
    "{{ '{0:{1:{2}}}'.format(1, 2, 3) }}", "{{ '{:{:{}}}'.format(1, 2, 3) }}", "{{ '{:{}}{}'.format(1, 5, 'z') }}",
    "{{ '{0:{1}}'.format(1, 'q') }}", "{{ '{:{x}}'.format(5, x=4) }}",
    # Specs that no type takes, and their errors.
    "{{ '{:abc}'.format(1) }}", "{{ '{:.}'.format(1) }}", "{{ '{:,_}'.format(1) }}", "{{ '{:_,}'.format(1) }}",
    "{{ '{:999999999999999999999}'.format(1) }}", "{{ '{:.99999999999999999999}'.format(1.5) }}",
    "{{ '{:q}'.format(1) }}", "{{ '{:é}'.format(1) }}", "{{ '{:\\x01}'.format(1) }}", "{{ '{:<<<}'.format(1) }}",
    "{{ '{:,c}'.format(65) }}", "{{ '{:_n}'.format(1) }}", "{{ '{:,x}'.format(255) }}", "{{ '{:,s}'.format('a') }}",
    "{{ '{:c}'.format(1114112) }}", "{{ '{:c}'.format(-1) }}", "{{ '{:+c}'.format(65) }}", "{{ '{:#c}'.format(65) }}",
    "{{ '{:.2d}'.format(1) }}", "{{ '{:z}'.format(1) }}", "{{ '{:zd}'.format(1) }}",
    # format_map.
    "{{ '{a}-{b}'.format_map({'a': 1, 'b': [2]}) }}", "{{ '{a}'.format_map({}) }}", "{{ '{0}'.format_map({}) }}",
    "{{ '{}'.format_map({'a': 1}) }}", "{{ '{a}'.format_map([1]) }}", "{{ '{a}'.format_map('xy') }}",
    "{{ '{a}'.format_map(1) }}", "{{ '{a}'.format_map(none) }}", "{{ '{a}'.format_map((1,)) }}",
    "{{ '{a}'.format_map() }}", "{{ '{a}'.format_map({}, {}) }}", "{{ '{a}'.format_map({}, b=1) }}",
    "{{ '{a}'.format_map(nothing) }}", "{{ '{a.b}'.format_map({'a': {'b': 'c'}}) }}",
    # Markup: fields escaped (a Markup argument kept), the result Markup.
    "{{ ('{}|{!r}|{!s}|{:>4}'|safe).format('<', '<', '<'|safe, '<') }}", "{{ ('{}'|safe).format('<'|safe) }}",
    "{{ ('{:>3}'|safe).format('<'|safe) }}", "{{ ('{!r}'|safe).format('<'|safe) }}",
    "{{ ('{0}{1}'|safe).format('&', 5) }}|{{ ('{a}'|safe).format_map({'a': '<'}) }}|{{ ('{:d}'|safe).format(5) }}",
    "{{ ('{}'|safe).format(none) }}", "{{ ('{:>3}'|safe).format(none) }}", "{{ ('{}'|safe).format([1, '<']) }}",
    "{{ ('<b>{}</b>'|safe).format('&') + '<' }}", "{{ ('{x}'|safe).format(x='\"') ~ ('{}'|safe).format(\"'\") }}",
    "{{ ('{}'|e).format('<') + '<' }}", "{{ [('{}'|safe).format('<')] }}", "{{ ('{0.a}'|safe).format({'a': '<'}) }}",
    "{{ '{0}|{0!s}'.format('<'|safe) }}", "{{ '{:d}'.format('<'|safe) }}", "{{ '{!r}'.format('<'|safe) }}",
    "{{ ('{'|safe).format(1) }}", "{{ ('{:{}}'|safe).format('a', '>3') }}",
    # What a template does with the result.
    "{{ ('{} {}'.format('a', 'b')).upper() }}|{{ '{}'.format(1) is string }}|{{ '{}'.format(2) | int + 1 }}",
    "{% for m in ['x', 'y'] %}{{ '{}:{}'.format(loop.index, m) }};{% endfor %}",
    "{{ s.format(1) }}|{{ '{0}{0}'.format(s) }}", "{{ '{}'.format(range(3)) }}|{{ '{}'.format({'a': 1}.items()) }}",
    "{{ '{:.2f}'.format('1.5') }}", "{{ '{:>5}'.format(range(2)) }}", "{{ '{:s}'.format(none) }}",
    "{{ '{:>5}'.format([1]) }}", "{{ '{:}'.format({'k': 1}) }}", "{{ '{}|{}|{}'.format([1, 'a'], {'k': none}, (1,)) }}",
    "{{ '{:d}'.format(10 ** 30) }}|{{ '{:,}'.format(-10 ** 25) }}|{{ '{:x}'.format(2 ** 100) }}",
    "{{ '{:.100f}'.format(0.1) }}", "{{ '{}'.format(1.0) }}|{{ '{}'.format(1e-7) }}|{{ '{:.2}'.format(-0.0) }}",
]
FORMAT_SPECS = [
    "", "s", ">8", "<8", "^8", "*^9", "0<6", "=8", "+", " ", "-", "z", "#", "0", "08", "010", ",", "_",
    ".0", ".2", ".3", ".12", "10.3", "d", "n", "c", "b", "o", "x", "X", "#b", "#o", "#x", "#X", "_b",
    "_x", "#_x", ",d", "e", "E", ".2e", "#.0e", "f", "F", ".0f", "#.0f", ",.2f", "_.1f", "g", "G",
    ".3g", "#g", ".0g", "%", ".1%", "n", ".3n", "z.1f", "+.2f", " .2f", "=+10.2f", "0=12,.2f",
    "010,.1f", "^+12,", "x^+#012_x", "@=+8", "-^7", "+08.3e",
]
FORMAT_VALUES = [
    "'abc'", "''", "'é😀'", "42", "0", "-7", "255", "1234567", "-1234567", "true", "false",
    "3.14159", "-2.5", "0.5", "-0.0", "-0.0001", "1e16", "1e-7", "1234567.891", "100.0",
    # Made at render time: jinja2 folds a constant `'inf'|float` into source it cannot run.
    "(('inf' ~ messages|join)|float)", "(('-inf' ~ messages|join)|float)",
    "(('nan' ~ messages|join)|float)", "none", "[1, 'a']", "{'k': 1}", "nothing",
]
for spec in FORMAT_SPECS:
    for value in FORMAT_VALUES:
        FORMAT_TEMPLATES.append("{{ '{:%s}'.format(%s) }}" % (spec, value))
for spec in ["", ">5", "d", ".1", "x"]:
    for value in ["'<'", "('<'|safe)", "5", "none"]:
        FORMAT_TEMPLATES.append("{{ ('[{:%s}]'|safe).format(%s) }}" % (spec, value))
OTHER_TEMPLATES += FORMAT_TEMPLATES

for v in VALUES:
    OTHER_TEMPLATES.append("{{ (%s)|filesizeformat }}|{{ (%s)|filesizeformat(true) }}" % (v, v))

# `striptags`, `wordwrap` and `urlize`: templates on the string `s`, each case its own `s`.
TEXT_CASES = []
STRIP_TEXTS = [
    "", "plain", "<b>bold</b> and <i>it</i>", "a <!-- c <b> --> b", "a <!--> b --> c", "<!-- open",
    "x < y > z", "a<b", "a > b", "<p>\t one\n\n two  </p>", "&amp; &lt;b&gt; &quot;q&quot; &#39;",
    "&ampx &amp &AMP; &notit; &notin; &nbsp;x&nbsp", "&#65;&#x42;&#X43;&#68 &#x; &#; &# &#xZ",
    "&#0;&#1;&#13;&#128;&#150;&#159;&#xD800;&#x110000;&#99999999999999999999;&#65534;",
    "&Afr; &fjlig; &NotEqualTilde; &acE; &bne;", "&unknownentity; &aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaamp;",
    "&lt;b&gt;kept&lt;/b&gt;", "<a href='x'>link</a>&nbsp;&mdash;&hellip;", "\u00a0a\u2003b\x1c c\u200b",
    "<<b>>", "<!---->x<!-- -- -->y", "<br/><br />line", "&amp;lt; &&amp; &;", "a&#x20;&#32;b",
    "<scr<b>ipt>x</script>", "&AElig&aeligx&eacute;&Eacute", "<?xml ?>t<!DOCTYPE html>u",
]
for text in STRIP_TEXTS:
    TEXT_CASES.append(("{{ s|striptags }}", text))
    TEXT_CASES.append(("{{ (s|safe)|striptags }}|{{ (s|striptags) is string }}", text))
for v in ["none", "5", "1.5", "[1, '<a>']", "{'a': '<b>&amp;'}", "true", "nothing", "('<i>&lt;</i>'|safe)",
          "('&amp;'|e)", "'<b>x</b>'|e"]:
    TEXT_CASES.append(("{{ (%s)|striptags }}" % v, ""))
for t in ["{{ 'x'|striptags(1) }}", "{{ 'x'|striptags(a=1) }}", "{{ 'x'|striptags(value=1) }}"]:
    TEXT_CASES.append((t, ""))
_rng = random.Random(53)
_HTML_BITS = ["<b>", "</b>", "<a href=\"x&amp;y\">", "</a>", "<!-- c -->", "<!--", "-->", "<", ">", "&amp;",
              "&lt;", "&gt;", "&copy;", "&copy", "&#169;", "&#xa9;", "&#0;", "&bogus;", "&", "#", ";", " ",
              "  ", "\n", "\t", "\u00a0", "word", "é", "x", "&nbsp", "&notin", "&ampere;", "&#x1F600;"]
for _ in range(120):
    TEXT_CASES.append(("{{ s|striptags }}", "".join(_rng.choice(_HTML_BITS) for _ in range(_rng.randint(1, 14)))))

WRAP_TEXTS = [
    "", "short", "Hello there -- you goof-ball, use the -b option!",
    "The quick brown fox jumps over the lazy dog and keeps on running far away",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a--b long-winded x-1 ab-c-d well-known-fact --lead trail-- ---x a---b",
    "first line\nsecond line that is a bit longer\n\nfourth\r\nfifth\rsixth",
    "  leading spaces and trailing   ", "tabs\there\tand\t\tthere", "\n\nafter blanks\n",
    "x\x0by\x0cz\x1cw\x1dv\x1eu\x85t\u2028s\u2029r", "non\u00a0breaking\u00a0space words here",
    "ünïcödé wörds ärë hérë tøø", "1-2 3-4 a-1 1-a _-_ ab-_c", "----------", "-a-b-c-d-e-f-g-",
    "http://example.com/a-very-long-path-with-hyphens-in-it", "word, word. word! word? \"word\" 'word'",
    "a\u3000b\u2003c", "中文字符测试没有空格的长句子" * 3, "end with newline\n", "\r\n",
]
WRAP_ARGS = [
    "", "(5)", "(10)", "(1)", "(2)", "(3)", "(7, false)", "(7, true, '|')", "(6, break_on_hyphens=false)",
    "(6, false, break_on_hyphens=false)", "(4, wrapstring='<br>')", "(4, wrapstring=('<br>'|safe))",
    "(12, wrapstring='')", "(width=8)", "(8, break_on_hyphens=1)", "(8, break_on_hyphens='x')",
    "(8, break_long_words=0)", "(0.5)", "(20)", "(79)", "(10 ** 30)", "(true)", "(9, wrapstring=none)",
]
for text in WRAP_TEXTS:
    for args in WRAP_ARGS:
        TEXT_CASES.append(("{{ s|wordwrap%s }}" % args, text))
_WORDS = ["a", "an", "the", "word", "hyphen-ated", "x-1", "ab-cd-ef", "--", "---", "a--b", "tab\t", "\t",
          "supercalifragilistic", "aaaaaaaaaaaaaaaaaaaaaaaaa", "long-word-with-many-parts", "é-ü", "1-2",
          "punct,", "end.", "\n", "\r\n", "  ", " ", "\u00a0", "-", "-x", "x-", "wo-rd-", "_a-b_"]
for _ in range(200):
    text = " ".join(_rng.choice(_WORDS) for _ in range(_rng.randint(1, 16)))
    width = _rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 13, 20])
    opts = _rng.choice(["", ", false", ", true, '/'", ", break_on_hyphens=false", ", false, break_on_hyphens=false"])
    TEXT_CASES.append(("{{ s|wordwrap(%d%s) }}" % (width, opts), text))
for t in ["{{ s|wordwrap(0) }}", "{{ s|wordwrap(-1) }}", "{{ s|wordwrap(false) }}", "{{ s|wordwrap('x') }}",
          "{{ s|wordwrap(none) }}", "{{ s|wordwrap(2.5) }}", "{{ s|wordwrap(2.5, false) }}", "{{ s|wordwrap(-0.5) }}",
          "{{ s|wordwrap(wrapstring=5) }}", "{{ s|wordwrap(wrapstring=[1]) }}", "{{ s|wordwrap(nothing) }}",
          "{{ s|wordwrap(wrapstring=nothing) }}", "{{ s|wordwrap(1, 2, 3, 4, 5) }}", "{{ s|wordwrap(x=1) }}",
          "{{ s|wordwrap(3, width=1) }}", "{{ s|wordwrap(s='a') }}", "{{ s|wordwrap(-(10 ** 30)) }}",
          "{{ s|wordwrap([1]) }}", "{{ s|wordwrap(environment=1) }}", "{{ (s|safe)|wordwrap(3) ~ '<' }}",
          "{{ (s|safe)|wordwrap(3, wrapstring='<br>'|safe) }}", "{{ (s|wordwrap(3, wrapstring='<br>'|safe)) ~ '<' }}"]:
    for text in ["abcdefgh ij", "", "a<b c&d", "x\ny"]:
        TEXT_CASES.append((t, text))
for v in ["5", "none", "[1]", "{'a': 1}", "nothing", "true", "1.5"]:
    TEXT_CASES.append(("{{ (%s)|wordwrap }}" % v, ""))
    TEXT_CASES.append(("{{ (%s)|wordwrap(wrapstring=1) }}" % v, ""))

URL_TEXTS = [
    "", "plain words only", "www.example.com", "http://example.com", "https://example.com/path?q=1#frag",
    "Visit www.example.com.", "(www.example.com)", "(see http://example.com/a_(b))", "<http://example.com>",
    "http://example.com/foo), bar", "((http://a.com/x)))", "[http://a.com]", "example.org", "example.zz",
    "sub.example.co.uk", "ab.com", "a.com", "x.y.info,", "mail me at someone@example.com.",
    "mailto:someone@example.com", "mailto:bad@", "@user", "a@b@c.com", "a@b.com:80", "www.a@b.com",
    "user@localhost", "u@d.c-m", "first.last+tag@sub.example.org", "http://127.0.0.1:8080/x",
    "http://1.2.3.4567", "http://256.1.1.1", "http://[::1]/", "http://[2001:db8::1]:443/p",
    "http://[1:2:3:4:5:6:7:8:9]", "http://[12345::]", "HTTP://EXAMPLE.COM", "WWW.EXAMPLE.COM", "Www.Example.Com",
    "http://xn--bcher-kva.example/", "www.xn--n3h.com", "http://example.com:123456", "http://example.com:0/",
    "ftp://files.example.com", "tel:+123456", "https://例え.jp/パス", "www.ex_ample.com", "http://a.b",
    "https://a%20b.com", "<b>http://example.com</b>", "'www.example.com'", "\"http://a.com\"",
    "http://a.com/?a=1&b=2", "a.com/x", "a.com:8080", "abc.comx", "www.example.com,www.other.com",
    "x\nwww.a.com\ty\u00a0www.b.com", "http://ſ.com", "HTTſ://a.com", "http://K.com", "www.İİ", "info.INFO",
    "edu.edu.gov", "long.long.long.long.long.long.long.long.long.long.long.long.long.com",
    "&lt;www.a.com&gt;", "(www.a.com&gt;", "www.a.com)).,", "www.a.com(", "(a@b.com)", "<a@b.com>",
]
URL_ARGS = [
    "", "(10)", "(5, true)", "(0)", "(-3)", "(true)", "(none, false, '_blank')", "(target='<x>')",
    "(rel='nofollow noopener')", "(rel='a  b', nofollow=true)", "(extra_schemes=['ftp:', 'tel:', 'mailto:'])",
    "(extra_schemes=['ftp://'])", "(target=5)", "(target='')", "(rel='')", "(trim_url_limit=8, target='t')",
]
for text in URL_TEXTS:
    for args in URL_ARGS:
        TEXT_CASES.append(("{{ s|urlize%s }}" % args, text))
_URL_BITS = ["www.example.com", "http://a.com", "https://b.org/x", "x@y.com", "mailto:m@n.io", "example.org",
             "(", ")", "<", ">", ".", ",", "&", "'", "\"", " ", "\n", "  ", "word", "ftp://f.net", "1.2.3.4",
             "http://1.2.3.4", "a.b", "a.com", "%", "-", "_", ":8080", "/path", "?q=1", "#f"]
for _ in range(250):
    text = "".join(_rng.choice(_URL_BITS) for _ in range(_rng.randint(1, 9)))
    args = _rng.choice(["", "(12)", "(3, true)", "(nofollow=true, target='_b')", "(extra_schemes=['ftp:'])"])
    TEXT_CASES.append(("{{ s|urlize%s }}" % args, text))
for t in ["{{ s|urlize(extra_schemes=5) }}", "{{ s|urlize(extra_schemes=[5]) }}", "{{ s|urlize(extra_schemes='ab') }}",
          "{{ s|urlize(extra_schemes=['a:']) }}", "{{ s|urlize(extra_schemes=['ab:///']) }}",
          "{{ s|urlize(extra_schemes=['a b:']) }}", "{{ s|urlize(extra_schemes=nothing) }}", "{{ s|urlize(rel=5) }}",
          "{{ s|urlize(rel=[1]) }}", "{{ s|urlize(rel=nothing) }}", "{{ s|urlize(target=nothing) }}",
          "{{ s|urlize(nothing) }}", "{{ s|urlize(2.5) }}", "{{ s|urlize(9.5) }}", "{{ s|urlize('3') }}",
          "{{ s|urlize(1, 2, 3, 4, 5, 6) }}", "{{ s|urlize(x=1) }}", "{{ s|urlize(3, trim_url_limit=1) }}",
          "{{ s|urlize(value='x') }}", "{{ s|urlize(extra_schemes={'ab:': 1}) }}", "{{ s|urlize(10 ** 30) }}",
          "{{ (s|safe)|urlize }}", "{{ s|urlize ~ '<' }}", "{{ (s|urlize) is string }}",
          "{{ s|urlize(extra_schemes=['WWW.'[:0] ~ 'ftp:']|map('lower')) }}",
          "{{ s|urlize(extra_schemes=['ftp:']|reverse) }}", "{{ s|urlize(extra_schemes=['ftp:']|list) }}"]:
    for text in ["www.a.com x", "plain <x>", "a@b.com", "ftp://x.y"]:
        TEXT_CASES.append((t, text))
for v in ["5", "none", "[1, 'www.a.com']", "{'k': 'a@b.com'}", "nothing", "true", "('<b>www.a.com</b>'|safe)"]:
    TEXT_CASES.append(("{{ (%s)|urlize }}" % v, ""))

# `indent` splits the text with a newline appended: a text ending in `\r` ends in one `\r\n`.
for text in ["a\r", "a\r\n", "a\nb\r", "a\rb", "a\n", "\r", "", "a\x0bb\x0c", "a\u2028b\u2029", "a\r\rb", "x\n\n"]:
    for t in ["{{ s|indent }}|", "{{ s|indent(2, true) }}|", "{{ s|indent(3, true, true) }}|", "{{ s|indent('> ', blank=true) }}|"]:
        TEXT_CASES.append((t, text))


def render(source, s):
    template = _cached_compile_jinja_template(source)
    try:
        return {"out": template.render(messages=[], s=s, add_generation_prompt=False)}
    except Exception as e:  # what apply_chat_template lets through
        return {"err": {"type": type(e).__name__, "message": str(e)}}


def main():
    cases = []
    for s in STRINGS:
        for call in CALLS:
            t = "{{ s.%s }}" % call
            cases.append({"t": t, "s": s, **render(t, s)})
    for t in OTHER_TEMPLATES:
        cases.append({"t": t, "s": "a b", **render(t, "a b")})
    for t, s in TEXT_CASES:
        cases.append({"t": t, "s": s, **render(t, s)})
    doc = {"transformers": transformers.__version__, "jinja2": jinja2.__version__, "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
    errors = sum("err" in c for c in cases)
    print(f"{len(cases)} cases ({errors} raise) written to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
