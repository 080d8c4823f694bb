// reference.mjs: js-tiktoken's encodings, the reference test/test_tokenizer.sh ("gpt2") and
// test/test_tiktoken.sh (ENCODING=cl100k_base) compare ./tokenize against. Nothing here
// shares code with data/bpe.h. With TIKTOKEN_FILE=F set, encode and docs use the ranks of
// the tiktoken file F (ranks 0..N-1) with ENCODING's split pattern and no special tokens.
//   node reference.mjs encode IN OUT       ids of the whole file, space separated
//   node reference.mjs decode IN OUT       the text of the ids in IN (space separated; special
//                                           tokens by their names)
//   node reference.mjs docs OUT FILE...     JSON [[ids of doc 1], ...]: a .jsonl file gives one
//                                           doc per line (its "text"), any other file one doc
//   node reference.mjs classes OUT          "FIRST LAST CLASS" runs over all code points,
//                                           CLASS in L N S O as JavaScript's \p{L} \p{N} \s see them
//   node reference.mjs vocab-text OUT       a text made of every token that is valid UTF-8
//   node reference.mjs pretokens IN OUT     the UTF-8 length of each match of the encoding's
//                                           split pattern over the file, one a line
//   node reference.mjs tiktoken-file OUT    the encoding's ranks as a tiktoken file, lines
//                                           "BASE64 RANK" in rank order; prints its pat_str
//   node reference.mjs hellaswag IN OUT     HellaSwag JSONL -> JSON [{label, ctx, endings}] of ids,
//                                           each ending encoded with a leading space
import fs from "node:fs";
import { getEncoding, Tiktoken } from "js-tiktoken";

const name = process.env.ENCODING || "gpt2";
let enc = getEncoding(name);
// The ranks as js-tiktoken ships them (js-tiktoken/ranks/NAME): bpe_ranks is lines of
// "KEY FIRST_RANK B64 B64 ...", the i-th base64 token having rank FIRST_RANK + i.
const ranks = (await import(`js-tiktoken/ranks/${name}`)).default;
const tokens = [];
for (const line of ranks.bpe_ranks.split("\n")) {
  const [, first, ...b64] = line.split(" ");
  b64.forEach((t, i) => tokens.push([Number.parseInt(first, 10) + i, t]));
}
tokens.sort((a, b) => a[0] - b[0]);
if (process.env.TIKTOKEN_FILE) {
  const lines = fs.readFileSync(process.env.TIKTOKEN_FILE, "utf8").split("\n").filter(Boolean);
  const b64 = [];
  for (const line of lines) {
    const [t, rank] = line.split(" ");
    b64[Number.parseInt(rank, 10)] = t;
  }
  enc = new Tiktoken({ pat_str: ranks.pat_str, special_tokens: {}, bpe_ranks: "x 0 " + b64.join(" ") });
}
// allowedSpecial=[], disallowedSpecial=[]: "<|endoftext|>" in text is ordinary text,
// which is what ./tokenize encode does.
const encode = (text) => enc.encode(text, [], []);
const [mode, out, ...rest] = process.argv.slice(2);

if (mode === "encode") {
  const text = fs.readFileSync(out, "utf8");
  fs.writeFileSync(rest[0], encode(text).join(" ") + "\n");
} else if (mode === "decode") {
  const ids = fs.readFileSync(out, "utf8").split(/\s+/).filter(Boolean).map(Number);
  fs.writeFileSync(rest[0], Buffer.from(enc.decode(ids)));
} else if (mode === "docs") {
  const docs = [];
  for (const f of rest) {
    const data = fs.readFileSync(f, "utf8");
    if (f.endsWith(".jsonl")) {
      for (const line of data.split("\n")) if (line.trim()) docs.push(encode(JSON.parse(line).text));
    } else {
      docs.push(encode(data));
    }
  }
  fs.writeFileSync(out, JSON.stringify(docs));
} else if (mode === "classes") {
  const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
  const lines = [];
  let start = 0, cur = null;
  for (let cp = 0; cp <= 0x110000; cp++) {
    let c = "O";
    if (cp < 0x110000) {
      const s = String.fromCodePoint(cp);
      c = L.test(s) ? "L" : N.test(s) ? "N" : S.test(s) ? "S" : "O";
    }
    if (cur === null) cur = c;
    if (cp === 0x110000 || c !== cur) {
      lines.push(`${start.toString(16).toUpperCase()} ${(cp - 1).toString(16).toUpperCase()} ${cur}`);
      start = cp;
      cur = c;
    }
  }
  fs.writeFileSync(out, lines.join("\n") + "\n");
} else if (mode === "vocab-text") {
  const parts = [];
  for (const [id] of tokens) {
    const s = enc.decode([id]);
    if (s.includes("\uFFFD")) continue; // not valid UTF-8 on its own (part of a character)
    parts.push(s + ["\n", " | ", "", "\t"][id % 4]);
  }
  fs.writeFileSync(out, parts.join(""));
} else if (mode === "hellaswag") {
  const examples = [];
  for (const line of fs.readFileSync(out, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const r = JSON.parse(line);
    examples.push({ label: r.label, ctx: encode(r.ctx), endings: r.endings.map((e) => encode(" " + e)) });
  }
  fs.writeFileSync(rest[0], JSON.stringify(examples));
} else if (mode === "pretokens") {
  const text = fs.readFileSync(out, "utf8");
  const lengths = [];
  for (const m of text.matchAll(new RegExp(ranks.pat_str, "ug"))) lengths.push(Buffer.byteLength(m[0]) + "\n");
  fs.writeFileSync(rest[0], lengths.join(""));
} else if (mode === "tiktoken-file") {
  fs.writeFileSync(out, tokens.map(([id, t]) => `${t} ${id}\n`).join(""));
  console.log(ranks.pat_str);
} else {
  console.error("usage: [ENCODING=name] node reference.mjs encode|docs|classes|vocab-text|pretokens|tiktoken-file|hellaswag ...");
  process.exit(2);
}
