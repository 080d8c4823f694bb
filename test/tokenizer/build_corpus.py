#!/usr/bin/env python3
"""Builds the tokenizer test corpus from text already on a Debian machine.

usage: build_corpus.py OUT.txt [VOCAB_TEXT]
Deterministic for a given machine: sorted file lists, fixed caps per source. Sources:
  - the King James Bible (package bible-kjv), English prose
  - translated man pages (/usr/share/man/LANG, shipped by man-db, dpkg-dev, ...): roff
  - translated messages from gettext catalogs (/usr/share/locale/*/LC_MESSAGES/*.mo):
    dozens of scripts (Arabic, Hebrew, Devanagari, Thai, CJK, Georgian, ...)
  - glibc's locale sources (/usr/share/i18n/locales): names in ~360 locales
  - C headers and Python modules: tabs, indentation and whitespace runs
  - VOCAB_TEXT: every GPT-2 token that is valid UTF-8 (written by reference.mjs)
  - a sweep over every code point assigned in Debian's UnicodeData.txt, in mixed contexts
  - hand-written edge cases: emoji (ZWJ sequences, skin tones, flags), digits, long
    whitespace runs, CRLF, contractions ('s 't 're 've 'm 'll 'd, upper case too), ...
Prints one line per source with its size.
"""
import glob
import gettext
import gzip
import os
import re
import subprocess
import sys

UCD = "/usr/share/unicode/UnicodeData.txt"


def bible(limit):
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    text = out.decode("utf-8", "replace")
    return text[:limit] + text[-limit // 4:]


def man_pages(per_lang):
    parts = []
    for d in sorted(glob.glob("/usr/share/man/*/")):
        lang = os.path.basename(d.rstrip("/"))
        if lang.startswith("man"):
            continue  # English
        got = 0
        for f in sorted(glob.glob(d + "man*/*.gz")):
            try:
                t = gzip.open(f).read().decode("utf-8")
            except (OSError, UnicodeDecodeError, EOFError):
                continue  # some old pages are Latin-1: not text for us
            parts.append(t)
            got += len(t)
            if got >= per_lang:
                break
    return "".join(parts)


def mo_catalogs(per_locale, per_file):
    parts = []
    for d in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/")):
        got = 0
        for f in sorted(glob.glob(d + "*.mo")):
            try:
                with open(f, "rb") as fp:
                    catalog = gettext.GNUTranslations(fp)._catalog
            except Exception:
                continue
            msgs = []
            for k in sorted(catalog, key=str):
                v = catalog[k]
                if isinstance(v, str) and v and k:
                    msgs.append(v)
            t = "\n".join(msgs)[:per_file] + "\n"
            parts.append(t)
            got += len(t)
            if got >= per_locale:
                break
    return "".join(parts)


def locale_strings(limit):
    """Quoted strings of glibc's locale sources (package locales: month and day names,
    currency, yes/no words, ... of ~360 locales), their <Uxxxx> escapes decoded."""
    def unescape(m):
        cp = int(m.group(1), 16)
        return "" if 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF else chr(cp)

    parts, got = [], 0
    for f in sorted(glob.glob("/usr/share/i18n/locales/*_*")):
        try:
            src = open(f, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        strings = re.findall(r'"([^"\n]*)"', src)
        t = ";".join(re.sub(r"<U([0-9A-Fa-f]{4,6})>", unescape, x) for x in strings)
        parts.append(t + "\n")
        got += len(parts[-1])
        if got >= limit:
            break
    return "".join(parts)


def source_code(limit):
    files = sorted(glob.glob("/usr/include/*.h"))[:40] + sorted(glob.glob("/usr/lib/python3*/[a-t]*.py"))[:30]
    parts, got = [], 0
    for f in files:
        try:
            t = open(f, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(t[:20000])
        got += len(parts[-1])
        if got >= limit:
            break
    return "".join(parts)


def unicode_sweep():
    """Every assigned code point except surrogates, private use and the middle of the
    huge ideograph/Hangul blocks, in groups of 7 between varying separators, so each
    class meets each other class and the optional leading space."""
    cps = []
    if not os.path.exists(UCD):
        return ""
    first = None
    for line in open(UCD, encoding="utf-8"):
        f = line.split(";")
        cp, name, cat = int(f[0], 16), f[1], f[2]
        if cat in ("Cs", "Co"):
            continue
        if name.endswith(", First>"):
            first = cp
            continue
        if name.endswith(", Last>"):
            cps.extend(range(first, cp + 1, 97))  # sample big blocks
            continue
        cps.append(cp)
    seps = [" ", "a", "1", "'s", "  ", "\n", "x ", "\t", " 'll", "\r\n", "", "!", " 7"]
    parts = []
    for i in range(0, len(cps), 7):
        parts.append(seps[(i // 7) % len(seps)])
        parts.append("".join(chr(c) for c in cps[i:i + 7]))
    return "".join(parts)


def edge_cases():
    zwj = ["👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🧑🏿‍🤝‍🧑🏻", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🇩🇪🇯🇵🇺🇸", "❤️‍🔥", "1️⃣#️⃣"]
    t = []
    t.append("Emoji: " + " ".join(zwj) + "\n" + "".join(zwj) + "\n")
    t.append("It's, it'S, IT'S; they're THEY'RE we've WE'VE I'm I'M you'll YOU'LL he'd HE'D don't DON'T\n")
    t.append("'s't're've'm'll'd ''s '''t 's 'x ' s 'S 'T 'Re 'rE 'LL 'll'll\n")
    # upper case is no contraction: "x'TWAS" is "x" "'" "TWAS", while "x'twas" is "x" "'t" "was";
    # the ' must start a word for this to matter (" '" is punctuation with its space)
    words = ["Tis", "tis", "TWAS", "twas", "SELL", "sell", "Mad", "mad", "Dad", "dad", "REally",
             "really", "VEry", "very", "LLama", "llama"]
    t.append(" ".join("x'" + w for w in words) + "\n" + "\n".join("'" + w for w in words) + "\n")
    t.append("rock 'n' roll, 'quoted', \"double\", `back`, ‘curly’ ’s ’t ʼs\n")
    t.append("1234567890 3.14159 1,000,000 0x1F -42 +7 1e-9 ²³¹ ½ ⅓ Ⅻ ٣٤٥ १२३ 一二三 ①②\n")
    t.append("x" + " " * 300 + "y" + "\t" * 40 + "z" + " \t " * 30 + "w\n")
    t.append("trailing spaces   \nline\r\nwindows\r\n\r\n\r\ncrlf end \r\n")
    t.append("\u00a0nbsp\u00a0\u00a0x \u3000ideo\u3000\u3000 \u2028ls\u2029ps \ufeffbom \u0085nel \u200bzwsp \u180e\n")
    t.append("\x0b\x0cvt ff\x0b \x1c\x1d\x1e\x1f seps \x00\x01\x7f controls\n")
    t.append("non-BMP: 𝐀𝐁𝐂 𝟘𝟙𝟚 𠀀𠀁 𐌰𐌱𐌲 𓀀𓀁 🂡 𝄞 𐍈\n")
    t.append("combining: e\u0301 n\u0303 a\u0308\u0304 Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ ก่า क्षि\n")
    t.append("<|endoftext|> is plain text here <|endoftext|><|endoftext|>\n")
    t.append("mixed: abc123def 123abc abc!!!def ... ??? !!!!!!!!!! ===========\n")
    t.append("URL https://example.com/a/b?c=d&e=f#g email x.y@z.org path /usr/bin/env\n")
    t.append("Grüße, Ελληνικά, Русский, עברית, العربية, हिन्दी, ไทย, 日本語の文章, 한국어, ქართული\n")
    t.append("    indented\n\tTabbed\n  \n\n\n   \n end")
    return "".join(t)


def main():
    out = sys.argv[1]
    vocab_text = open(sys.argv[2], encoding="utf-8").read() if len(sys.argv) > 2 else ""
    sources = [
        ("bible", bible(400_000)),
        ("man pages", man_pages(30_000)),
        ("gettext catalogs", mo_catalogs(6_000, 2_000)),
        ("locale strings", locale_strings(300_000)),
        ("source code", source_code(200_000)),
        ("vocab tokens", vocab_text),
        ("unicode sweep", unicode_sweep()),
        ("edge cases", edge_cases() * 3),
        # long words take the heap path of bpe_merge_word (js-tiktoken is O(n^2) here: keep short)
        ("long words", " " + "ab" * 1500 + " " + "xyz" * 700 + " " + "7" * 600 + " " + "=" * 900 + "\n"),
        ("whitespace tail", " \n\t  \n  "),  # `\s+(?!\S)` at the very end of the text
    ]
    text = "".join(s for _, s in sources)
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    for name, s in sources:
        print("  corpus: %-17s %8d bytes" % (name, len(s.encode("utf-8"))))
    print("  corpus: %-17s %8d bytes -> %s" % ("total", len(text.encode("utf-8")), out))


if __name__ == "__main__":
    main()
