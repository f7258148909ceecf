#!/usr/bin/env python3
"""Writes the tokenizer parity fixtures of tests/golden/tokenizer/ with Hugging Face `tokenizers`
and `transformers` (PyPI; no torch needed). Run from anywhere:

    python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers transformers jinja2
    /tmp/venv-tok/bin/python tests/golden/make_tokenizer_golden.py

What it writes (docs/tokenizer.md describes what the C++ tests check against each):
  tokenizer.json                 a byte-level BPE trained here with Qwen2's normalizer (NFC),
                                 split regex, byte-level pre-tokenizer and decoder; Qwen's special
                                 tokens appended after the merges' vocabulary, as Qwen's files hold
                                 them, plus non-special added tokens (<tool_call>, <think>, ...) and
                                 one with lstrip/rstrip (<|mask|>)
  tokenizer_config.json          Qwen2.5's ChatML template (default system prompt)
  tokenizer_config_qwen2.json    Qwen2's template; tokenizer_config_qwen3.json: Qwen3's
  corpus.txt                     the encode cases, one per line (raw bytes, some not UTF-8)
  encode_expected.jsonl          per line of corpus.txt, then once for the whole file: the ids
                                 and their decoded text (the input, NFC-normalised)
  decode_expected.jsonl          id sequences (bytes split mid-character, special tokens) and
                                 what `decode` makes of them, with and without special tokens
  chat_expected.jsonl            conversations: apply_chat_template's ids and the loss mask the
                                 reference pipeline builds on them (or the error it raises)

Inputs of the bytes that are not UTF-8: Python strings cannot hold them, so each line is decoded
with errors="replace" (one U+FFFD per maximal ill-formed subsequence) before HF sees it; the C++
tokenizer replaces them the same way.

The training text is tests/golden/tokenizer/multilingual.txt plus some of the repository's own
docs and sources at a fixed commit, so the same tokenizer comes out on every run.
"""

import json
import os
import random
import subprocess
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "tokenizer")
TRAIN_COMMIT = "081b832"
TRAIN_FILES = ["docs/semantics.md", "docs/architecture.md", "data/readers.cpp", "data/packing.cpp",
               "tools/bench/attention_vs_torch.py", "tests/golden/make_qwen_golden.py"]
VOCAB_SIZE = 2400

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
NON_SPECIAL = ["<tool_call>", "</tool_call>", "<think>", "</think>"]

QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

QWEN3_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""


def training_text():
    with open(os.path.join(OUT, "multilingual.txt"), encoding="utf-8") as f:
        texts = [f.read()] * 3  # weigh the multilingual text up against the English docs
    for path in TRAIN_FILES:
        texts.append(subprocess.run(["git", "-C", REPO, "show", f"{TRAIN_COMMIT}:{path}"],
                                    check=True, capture_output=True, text=True).stdout)
    return texts


def train():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer=trainer)
    # As in Qwen's files: the added tokens follow the merges' vocabulary.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in NON_SPECIAL])
    tok.add_special_tokens([AddedToken("<|mask|>", special=True, normalized=False, lstrip=True,
                                       rstrip=True)])
    return tok


def write_configs(tok):
    decoder = {}
    for token_id, t in sorted(tok.get_added_tokens_decoder().items()):
        decoder[str(token_id)] = {"content": t.content, "lstrip": t.lstrip,
                                  "normalized": t.normalized, "rstrip": t.rstrip,
                                  "single_word": t.single_word, "special": t.special}
    for name, template, eos in [("tokenizer_config.json", QWEN25_TEMPLATE, "<|im_end|>"),
                                ("tokenizer_config_qwen2.json", QWEN2_TEMPLATE, "<|endoftext|>"),
                                ("tokenizer_config_qwen3.json", QWEN3_TEMPLATE, "<|im_end|>")]:
        config = {"add_prefix_space": False, "added_tokens_decoder": decoder,
                  "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
                  "bos_token": None, "chat_template": template,
                  "clean_up_tokenization_spaces": False, "eos_token": eos,
                  "errors": "replace", "model_max_length": 32768, "pad_token": "<|endoftext|>",
                  "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
                  "unk_token": None}
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=2)
            f.write("\n")


def corpus_lines():
    """The encode cases: raw bytes, one case per line (so no case holds a newline)."""
    text_cases = [
        "Hello world", "hello   world", "  leading spaces", "trailing spaces   ",
        "tab\tseparated\tvalues\t", "mixed \t \t whitespace", "carriage\rreturn",
        "windows line\r", "\u00a0no-break\u00a0space", "em\u2003space and ideographic\u3000space",
        "mongolian\u180evowel separator", "next\u0085line", "zero\u200bwidth\u200cjoiners\u200d",
        "bom\ufefffeff", "line\u2028separator\u2029paragraph", "vertical\x0btab\x0cform feed",
        "I'm sure they'll say it's fine, we've done what you'd do.",
        "I'M SURE THEY'LL SAY IT'S FINE, WE'VE DONE WHAT YOU'D DO.",
        "mIxEd CaSe: It'S, We'Ve, They'Re, I'D, You'Ll, Don'T",
        "long s: it'\u017f and kelvin '\u212a",
        "quotes 'single' \"double\" `back` ’curly’ ‘open’",
        "1234567890", "3.14159 2.71828 -42 +7 1e-9 0x1F", "1,000,000.00 and 12:30:45",
        "fullwidth \uff11\uff12\uff13 superscript \u00b2\u00b3 fractions \u00bd\u00bc roman \u216b",
        "arabic digits \u0661\u0662\u0663 devanagari \u0967\u0968",
        "e\u0301 n\u0303 a\u0308 o\u0302 u\u0304 (decomposed)",
        "\u00e9 \u00f1 \u00e4 \u00f4 \u016b (composed)",
        "\u212b angstrom sign and A\u030a ring", "\u1100\u1161\u11a8 hangul jamo",
        "Vie\u0323\u0302t Nam, Tie\u0302\u0301ng Vie\u0323\u0302t",
        "combining only: \u0301\u0302\u0303", "zalgo h\u0336\u0327e\u0337\u0301l\u0335l\u0338o",
        "今天天气很好，我们去公园散步吧。", "東京は日本の首都です。", "서울은 대한민국의 수도입니다.",
        "中文English混合Mixed日本語テキスト",
        "emoji 😀😂👍 ❤️ 🎉", "zwj 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 👁️‍🗨️", "flags 🇫🇷🇯🇵🇺🇸 skin 👋🏽👍🏿",
        "keycap 1️⃣ #️⃣ variation ☕︎ ☕️", "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 ∑∫√∞≠≤",
        "def encode(self, text: str) -> list[int]:", "    return [self.vocab[t] for t in tokens]",
        "\t\tif (x < 0 && y >= 10) { z += x * y; }",
        "for (int i = 0; i < n; ++i) std::cout << v[i] << '\\n';",
        "#include <vector>  // comment   ", "a=b+c*d/e-f%g^h|i&j~k!l?m:n;o,p.q",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
        "https://example.com/path?query=1&b=2#frag", "user@example.com",
        "Hello<|im_end|>world", "<|im_start|>user: text", "<|im_start|>assistant",
        "text <|endoftext|> more <|endoftext|><|endoftext|>", "<|im_start|><|im_end|>",
        "partial <|im_start and <|im_end| and |im_end|>", "<think>reasoning</think> answer",
        "call <tool_call>{\"name\": \"f\"}</tool_call> done", "a   <|mask|>   b",
        "<|mask|>start", "end<|mask|>", "x<|mask|><|mask|>y", "", " ", "   ", "\t",
        "!!!???...", "---===+++", "((()))[[[]]]{{{}}}", "' '' ''' 's 't",
        "Ⅰ Ⅱ Ⅲ ⅳ ⑴ ① ㈠ ﹏", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "ｶﾀｶﾅ half-width",
    ]
    lines = [t.encode("utf-8") for t in text_cases]
    lines += [
        b"invalid \xff byte", b"truncated \xe4\xb8", b"lone continuation \x80\x80 bytes",
        b"overlong \xc0\xaf slash", b"surrogate \xed\xa0\x80 half", b"\xf0\x9f\x98 cut emoji",
        b"\xf4\x90\x80\x80 beyond U+10FFFF", b"\xe0\x80\x80 overlong three", b"\xfe\xfe\xff",
        b"mixed \xe4\xbd\xa0\xe5\xa5 ok \xc3\x28 bad",
    ]
    with open(os.path.join(OUT, "multilingual.txt"), "rb") as f:
        lines += f.read().split(b"\n")[:-1]
    code = subprocess.run(["git", "-C", REPO, "show", f"{TRAIN_COMMIT}:data/batch.cpp"],
                          check=True, capture_output=True).stdout
    lines += code.split(b"\n")[:60]
    assert all(b"\n" not in line for line in lines)
    return lines


def write_encode_cases(tok):
    lines = corpus_lines()
    with open(os.path.join(OUT, "corpus.txt"), "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    whole = b"\n".join(lines) + b"\n"
    with open(os.path.join(OUT, "encode_expected.jsonl"), "w", encoding="utf-8") as f:
        for raw in lines + [whole]:
            text = raw.decode("utf-8", errors="replace")
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            if b"<|mask|>" not in raw:  # its lstrip and rstrip eat the spaces around it
                assert decoded == unicodedata.normalize("NFC", text), (text, decoded)
            f.write(json.dumps({"ids": ids, "decoded": decoded}, ensure_ascii=False) + "\n")
    return len(lines)


def write_decode_cases(tok):
    rng = random.Random(0)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    sample = "今天 é 👩‍💻 ok"
    byte_ids = tok.encode(sample).ids
    cases = [[i] for i in byte_ids] + [byte_ids[:k] for k in range(1, len(byte_ids))]
    for _ in range(60):
        cases.append([rng.randrange(vocab) for _ in range(rng.randrange(1, 12))])
    special_ids = [tok.token_to_id(t) for t in SPECIAL + NON_SPECIAL + ["<|mask|>"]]
    cases.append(special_ids + byte_ids[:3] + special_ids)
    with open(os.path.join(OUT, "decode_expected.jsonl"), "w", encoding="utf-8") as f:
        for ids in cases:
            for skip in (False, True):
                text = tok.decode(ids, skip_special_tokens=skip)
                f.write(json.dumps({"ids": ids, "skip_special_tokens": skip, "text": text},
                                   ensure_ascii=False) + "\n")
    return len(cases)


def reference_mask(hf, messages, ids):
    """The reference pipeline's loss mask for a template without {% generation %} blocks: every
    assistant message's span, from the length of the rendered conversation before it to the length
    with it, each prefix render checked to reproduce the start of the full render."""
    eos = hf.eos_token_id
    def render(k):
        return list(hf.apply_chat_template(messages[:k], tokenize=True, return_dict=True)["input_ids"])
    def length(k):
        prefix = render(k)
        consistent = prefix == ids[:len(prefix)] or (
            len(prefix) > 1 and prefix[-1] == eos and prefix[:-1] == ids[:len(prefix) - 1])
        if len(prefix) > len(ids) or not consistent:
            raise ValueError(f"rendering the first {k} messages alone does not reproduce a prefix "
                             "of the full conversation")
        return len(prefix)
    mask = [0] * len(ids)
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError("no assistant message")
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            for t in range(length(i), length(i + 1)):
                mask[t] = 1
    return mask


def conversations():
    sys_msg = {"role": "system", "content": "You answer briefly."}
    u = lambda c: {"role": "user", "content": c}
    a = lambda c: {"role": "assistant", "content": c}
    common = [
        [u("Hi!"), a("Hello! How can I help?")],
        [sys_msg, u("What is 2+2?"), a("4")],
        [u("Translate: good morning"), a("Bonjour"), u("And in Chinese?"), a("早上好")],
        [sys_msg, u("one"), a("1"), u("two"), a("2"), u("three"), a("3")],
        [u("Write code"), a("```python\ndef f(x):\n    return x * 2\n```\n")],
        [u("emoji?"), a("Sure 👩‍💻 🇫🇷 ❤️")],
        [u("   spaces   "), a("  trailing  \n\n")],
        [u(""), a("")],
        [u("a"), a("b"), {"role": "system", "content": "Now be formal."}, u("c"), a("d")],
        [u("tell me about <|im_end|> tokens"), a("They close a turn: <|im_end|>.")],
        [u("Vie\u0323\u0302t Nam"), a("Vi\u1ec7t Nam is in Southeast Asia.")],
        [u("end on user"), a("ok"), u("bye")],
        [a("I speak first"), u("ok"), a("fine")],
    ]
    qwen3_only = [
        [u("Think first"), a("<think>\nLet me see.\n</think>\n\nThe answer is 42.")],
        [u("Reasoned"), {"role": "assistant", "content": "Yes.", "reasoning_content": "Because."}],
        [sys_msg, u("q"), {"role": "assistant", "content": "a", "reasoning_content": ""}],
        [u("q1"), a("a1"), u("q2"), a("a2")],  # the earlier turn renders differently alone
    ]
    errors = [[u("only a user")], [sys_msg]]
    return common, qwen3_only, errors


def write_chat_cases():
    common, qwen3_only, errors = conversations()
    records = []
    for name, config in [("qwen2.5", "tokenizer_config.json"),
                         ("qwen2", "tokenizer_config_qwen2.json"),
                         ("qwen3", "tokenizer_config_qwen3.json")]:
        hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(OUT, "tokenizer.json"))
        with open(os.path.join(OUT, config), encoding="utf-8") as f:
            cfg = json.load(f)
        hf.chat_template = cfg["chat_template"]
        hf.eos_token = cfg["eos_token"]
        for messages in common + (qwen3_only if name == "qwen3" else []) + errors:
            record = {"template": config, "messages": messages}
            ids = list(hf.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])
            try:
                record["loss_mask"] = reference_mask(hf, messages, ids)
                record["input_ids"] = ids
            except ValueError as e:
                record["error"] = str(e)
            records.append(record)
    with open(os.path.join(OUT, "chat_expected.jsonl"), "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return records


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = train()
    tok.save(os.path.join(OUT, "tokenizer.json"))
    write_configs(tok)
    n_lines = write_encode_cases(tok)
    n_decode = write_decode_cases(tok)
    records = write_chat_cases()
    errors = sum("error" in r for r in records)
    print(f"vocab {tok.get_vocab_size()}: {n_lines} corpus lines, {n_decode} decode cases, "
          f"{len(records)} conversations ({errors} rejected)")


if __name__ == "__main__":
    main()
