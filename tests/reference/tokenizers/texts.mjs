// texts.mjs — the texts compare.mjs encodes with both tokenizers: prose in many scripts,
// code, emoji, whitespace, digits, NFC cases, each vocabulary's special tokens inside text,
// seeded random strings, and 1 MiB inputs. The same on every run.

// The special tokens of each vocabulary that the texts put inside text.
const specials = {
  gpt2: ['<|endoftext|>'],
  qwen3: ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tool_call>', '<|fim_prefix|>'],
  llama3: ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>',
    '<|reserved_special_token_0|>'],
  deepseek_v3: ['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<｜fim▁hole｜>',
    '<｜tool▁calls▁begin｜>'],
};

const prose = [
  'Hello, world! The quick brown fox jumps over the lazy dog.',
  '你好，世界。我们今天去公园吧！天气很好，阳光明媚。',
  '日本語のテキストです。カタカナとひらがなと漢字。',
  '한국어 텍스트입니다. 안녕하세요!',
  'مرحبا بالعالم، كيف حالك؟',
  'नमस्ते दुनिया, आप कैसे हैं?',
  'Привет, мир! Как дела?',
  'Ελληνικά κείμενα με τόνους: άέήίόύώ.',
  'שלום עולם! מה שלומך?',
  'สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ',
  'Ça va très bien, merci. Grüße aus Köln. ñandú, façade, naïve, Ångström.',
  'Tiếng Việt có dấu: Người Việt Nam.',
  'ქართული ენა, Հայերեն, አማርኛ, ᏣᎳᎩ, ᠮᠣᠩᠭᠣᠯ',
  'Mixed: English中文日本語한국어العربيةहिन्दी',
  'I\'ll, you\'d, we\'re, they\'ve, I\'m, DON\'T, She\'S, it\'LL, O\'Brien\'s',
];

const code = [
  '#include <vector>\nint main() {\n    std::vector<int> v{1, 2, 3};\n    for (int x : v) printf("%d\\n", x);\n    return 0;\n}\n',
  'def f(x: int) -> int:\n    """Doc."""\n    if x <= 1:\n\treturn 1\n    return x * f(x - 1)  # recursion\n',
  'const add = (a, b) => a + b; // arrow\nconsole.log(`${add(1, 2)}`);\n',
  '{"key": [1, 2.5e-3, true, null], "nested": {"a": "b\\u00e9"}}',
  '<html><body class="x"><p>Hi &amp; bye</p></body></html>',
  'for f in *.txt; do\n  grep -n "TODO" "$f" | wc -l\ndone 2>&1 >/dev/null',
  'fn main() { let s: &str = "hi"; println!("{s:?}"); }',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name;',
  '    \tindented\n\t\t    mixed\r\n  \r\n\n\n\ttabs',
  'x=1;y=2;z=x+y;if(z>=3){return;}else{x++;}',
];

const emoji = [
  '👨‍👩‍👧‍👦 family, 👍🏽 thumbs, 🏳️‍🌈 flag, 🇯🇵🇺🇸 flags, 1️⃣ keycap',
  '😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘',
  'I ❤️ NY ☕ ♥ ✓ ✗ ★ ☆ ⚡ ⚽ 🎉🎊',
  '🧑🏿‍🚀 astronaut, 👩🏻‍💻 coder, 🫠 melting, 🪿 goose',
];

const whitespace = [
  ' ', '  ', '   x', 'x   ', 'a  b   c    d', '\n', '\n\n', '\n\n\n', 'a\n\nb', '\r\n', 'a\r\n\r\nb', '\t', '\t\t x',
  ' \n \n ', '  \n  ', 'x \t\n y', '\u00a0nbsp\u00a0', 'ideographic\u3000space', 'line\u2028sep\u2029para',
  'zero\u200bwidth', 'en\u2002em\u2003thin\u2009', '\u180emongolian', 'trailing   ', '   leading', '\v\f vertical',
];

const digits = [
  '0123456789', '3.14159 2.71828', '1,000,000 and 1 000 000', '٠١٢٣٤٥٦٧٨٩ ۰۱۲۳', '１２３ fullwidth',
  'Ⅻ ½ ¾ ² ³ ① ⑳', '2024-12-03T15:04:05Z', '0x1F 0b1010 1e-9',
];

// Decomposed and compatibility forms: NFC composes the first, keeps the second.
const normalization = [
  'cafe\u0301 A\u030a n\u0303', '\u1100\u1161 \u1112\u1161\u11ab', 'ﬁ ﬂ ① ㎏ Ⅸ ｶ', 'e\u0301\u0327 o\u0308\u0304',
  'q\u0307\u0323 \u0041\u0323\u0302', '\u0915\u093c \u09a1\u09bc',
];

// Each vocabulary's special tokens inside text: alone, glued to words, side by side, cut short.
function withSpecials(name) {
  const list = specials[name];
  const [a, b = list[0]] = list;
  const out = [
    `${a}`, `${a}${b}`, `x${a}y`, ` ${a} `, `${a}\n${b}\n`, `${a.slice(0, -1)}`, `${a.slice(1)}`,
    `user${a}hello${b}assistant`, `${a}${a}${a}`, `${a} ${a.slice(0, 4)} ${b}`,
  ];
  for (const token of list) out.push(`Text before ${token} and after.`, `${token}你好${token}`);
  return out;
}

// mulberry32: a small seeded generator, so that the texts are the same on every run.
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Where random code points come from: ASCII most often, then scripts, marks, spaces, emoji,
// and any plane (unassigned ones too), never a surrogate.
const ranges = [
  [0x20, 0x7e, 30], [0x0, 0x1f, 2], [0xa0, 0x24f, 8], [0x300, 0x36f, 4], [0x370, 0x52f, 4], [0x590, 0x6ff, 4],
  [0x900, 0xdff, 4], [0x1100, 0x11ff, 2], [0x2000, 0x206f, 4], [0x3000, 0x30ff, 4], [0x4e00, 0x9fff, 8],
  [0xac00, 0xd7a3, 4], [0xf900, 0xffff, 3], [0x10000, 0x1ffff, 4], [0x1f300, 0x1faff, 6], [0x20000, 0x323af, 3],
  [0xe000, 0xf8ff, 1], [0x30000, 0x10ffff, 1],
];
const totalWeight = ranges.reduce((sum, r) => sum + r[2], 0);

function randomText(next, length) {
  let out = '';
  for (let i = 0; i < length; ++i) {
    let pick = next() * totalWeight;
    const [first, last] = ranges.find((r) => (pick -= r[2]) < 0) ?? ranges[0];
    let c = first + Math.floor(next() * (last - first + 1));
    if (c >= 0xd800 && c <= 0xdfff) c = 0x41;
    out += String.fromCodePoint(c);
  }
  return out;
}

// [name, text] pairs for one vocabulary; --quick keeps fewer random strings and shorter
// long inputs (the default suite), the full set runs in the slow suite.
export function texts(name, { quick = false } = {}) {
  const out = [];
  const group = (label, list) => list.forEach((text, i) => out.push([`${label} ${i}`, text]));
  group('prose', prose);
  group('code', code);
  group('emoji', emoji);
  group('whitespace', whitespace);
  group('digits', digits);
  group('normalization', normalization);
  group('special tokens', withSpecials(name));
  const next = generator(20261203);
  const random = [];
  for (let i = 0; i < (quick ? 60 : 400); ++i) random.push(randomText(next, 1 + Math.floor(next() * 60)));
  group('random', random);
  // A long text of all the above in a seeded order, and long runs of one character.
  const size = quick ? 1 << 16 : 1 << 20;
  const pieces = out.map(([, text]) => text);
  let long = '';
  while (long.length < size) long += pieces[Math.floor(next() * pieces.length)] + [' ', '\n', '', '. '][Math.floor(next() * 4)];
  out.push([`mixed ${long.length} chars`, long]);
  for (const ch of [' ', 'a', '\n', '你', '=', '\t'])
    out.push([`run of ${size} ${JSON.stringify(ch)}`, ch.repeat(ch.length === 1 && ch.charCodeAt(0) > 0x7f ? size / 3 : size)]);
  return out;
}
