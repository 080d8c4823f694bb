// reference.mjs: js-tiktoken's "gpt2" encoding, the reference test/test_tokenizer.sh
// compares ./tokenize against. Nothing here shares code with data/bpe.h.
//   node reference.mjs encode IN OUT       ids of the whole file, space separated
//   node reference.mjs docs OUT FILE...     JSON [[ids of doc 1], ...]: a .jsonl file gives one
//                                           doc per line (its "text"), any other file one doc
//   node reference.mjs classes OUT          "FIRST LAST CLASS" runs over all code points,
//                                           CLASS in L N S O as JavaScript's \p{L} \p{N} \s see them
//   node reference.mjs vocab-text OUT       a text made of every token that is valid UTF-8
//   node reference.mjs hellaswag IN OUT     HellaSwag JSONL -> JSON [{label, ctx, endings}] of ids,
//                                           each ending encoded with a leading space
import fs from "node:fs";
import { getEncoding } from "js-tiktoken";

const enc = getEncoding("gpt2");
// allowedSpecial=[], disallowedSpecial=[]: "<|endoftext|>" in text is ordinary text,
// which is what ./tokenize encode does.
const encode = (text) => enc.encode(text, [], []);
const [mode, out, ...rest] = process.argv.slice(2);

if (mode === "encode") {
  const text = fs.readFileSync(out, "utf8");
  fs.writeFileSync(rest[0], encode(text).join(" ") + "\n");
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
  for (let id = 0; id < 50256; id++) {
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
} else {
  console.error("usage: node reference.mjs encode|docs|classes|vocab-text|hellaswag ...");
  process.exit(2);
}
