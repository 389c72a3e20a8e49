"""Multilingual texts for `bench/peers.js --texts multilingual`: chat-like paragraphs in ten
scripts, made by Faker's word lists (a package on PyPI, seeded, so every run and machine gets
the same texts). What matters for a tokenizer is the scripts and how words run together (Chinese,
Japanese and Thai without spaces, the others with them), not where the words come from.

    python bench/multilingual.py <out.json> [texts per script]

Writes {script: [texts]}; each text is one to eight sentences, a third of them with a number and
an emoji, a quarter of them with English words around the sentences, as chat data in those
languages holds them.
"""

import json
import random
import sys

from faker import Faker

LOCALES = {
    "Chinese": "zh_CN",
    "Japanese": "ja_JP",
    "Thai": "th_TH",
    "Russian": "ru_RU",
    "Arabic": "ar_AA",
    "Bengali": "bn_BD",
    "Greek": "el_GR",
    "Hebrew": "he_IL",
    "English": "en_US",
}


def texts(locale, count, seed):
    fake = Faker(locale)
    fake.seed_instance(seed)
    english = Faker("en_US")
    english.seed_instance(seed + 1)
    rng = random.Random(seed)
    out = []
    for i in range(count):
        text = fake.paragraph(nb_sentences=rng.randint(1, 8))
        if i % 3 == 0:
            text += f" {rng.randint(1, 99999)} {fake.emoji()}"
        if i % 4 == 1:
            text = f"{english.sentence()} {text} {english.word()}"
        out.append(text)
    return out


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    mix = {script: texts(locale, count, 7 + k) for k, (script, locale) in enumerate(LOCALES.items())}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(mix, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
