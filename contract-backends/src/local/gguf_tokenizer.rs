//! A Hugging Face `tokenizers` tokenizer built from a GGUF file's metadata, as llama.cpp builds
//! it: `tokenizer.ggml.model` (`gpt2`: byte-level BPE), `.tokens`, `.merges`, `.token_type`
//! (control and user-defined tokens become added tokens, control ones special), `.pre` (the
//! pre-tokenizer's split regex) and the special token ids.
//!
//! [`tokenizer_json`] writes the tokenizer as a `tokenizer.json` document, the form the token-mask
//! engine (llguidance's `ByteTokenizer::from_json_bytes`) reads.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use serde_json::{json, Map, Value as Json};

use super::error::LocalError;

/// GGUF token types (llama.cpp's `llama_token_type`).
mod token_type {
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
}

/// Texts llama.cpp also treats as end of generation when present in the vocabulary.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
];

const GPT2_SPLIT: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const GPT4O_SPLIT: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
);

/// The tokenizer-related metadata of a GGUF file.
#[derive(Debug, Clone)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model` (`gpt2`, `llama`, ...).
    pub model: String,
    /// `tokenizer.ggml.pre`, when present.
    pub pre: Option<String>,
    /// The tokens, by id.
    pub tokens: Vec<String>,
    /// Their types, by id (1 normal when absent).
    pub token_types: Vec<i32>,
    /// BPE merges, `"left right"`.
    pub merges: Vec<String>,
    /// Begin-of-sequence token.
    pub bos: Option<u32>,
    /// End-of-sequence token.
    pub eos: Option<u32>,
    /// Every token that ends generation (EOS, end of turn, and llama.cpp's known texts).
    pub stop_tokens: Vec<u32>,
    /// Padding token.
    pub pad: Option<u32>,
    /// Unknown token.
    pub unk: Option<u32>,
    /// Whether a BOS token starts every sequence.
    pub add_bos: bool,
    /// `tokenizer.chat_template`, when present.
    pub chat_template: Option<String>,
}

fn md<'a>(ct: &'a Content, key: &str) -> Option<&'a Value> {
    ct.metadata.get(key)
}

fn md_u32(ct: &Content, key: &str) -> Option<u32> {
    md(ct, key).and_then(|v| match v {
        Value::U32(x) => Some(*x),
        Value::I32(x) => u32::try_from(*x).ok(),
        Value::U64(x) => u32::try_from(*x).ok(),
        Value::I64(x) => u32::try_from(*x).ok(),
        Value::U16(x) => Some(*x as u32),
        Value::U8(x) => Some(*x as u32),
        _ => None,
    })
}

fn md_str(ct: &Content, key: &str) -> Option<String> {
    md(ct, key).and_then(|v| v.to_string().ok()).cloned()
}

fn md_strings(ct: &Content, key: &str) -> Result<Option<Vec<String>>, LocalError> {
    let Some(v) = md(ct, key) else {
        return Ok(None);
    };
    let items = v
        .to_vec()
        .map_err(|_| LocalError::Gguf(format!("`{key}` is not an array")))?;
    items
        .iter()
        .map(|x| {
            x.to_string()
                .cloned()
                .map_err(|_| LocalError::Gguf(format!("`{key}` holds a non-string")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn md_ints(ct: &Content, key: &str) -> Result<Option<Vec<i32>>, LocalError> {
    let Some(v) = md(ct, key) else {
        return Ok(None);
    };
    let items = v
        .to_vec()
        .map_err(|_| LocalError::Gguf(format!("`{key}` is not an array")))?;
    items
        .iter()
        .map(|x| match x {
            Value::I32(i) => Ok(*i),
            Value::U32(i) => Ok(*i as i32),
            Value::I8(i) => Ok(*i as i32),
            Value::U8(i) => Ok(*i as i32),
            _ => Err(LocalError::Gguf(format!("`{key}` holds a non-integer"))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Reads a GGUF file's metadata and tensor index (not the tensor data), checked as
/// [`read_content_from`] checks it; errors name the file.
pub fn read_content(gguf_path: &Path) -> Result<Content, LocalError> {
    let mut f = fs::File::open(gguf_path).map_err(|e| LocalError::io(gguf_path, e))?;
    read_content_from(&mut f).map_err(|e| e.in_file(gguf_path))
}

/// Reads GGUF metadata and the tensor index from `reader`, and checks that every tensor the
/// index lists lies within the data (so a truncated file fails here, before any weight is read,
/// and no tensor shape can overflow a size computation).
pub fn read_content_from<R: std::io::Read + std::io::Seek>(
    reader: &mut R,
) -> Result<Content, LocalError> {
    let ct = Content::read(reader).map_err(|e| LocalError::GgufRead {
        what: "cannot read the header, metadata or tensor index (truncated or not a GGUF file?)"
            .into(),
        source: super::error::without_backtrace(e),
    })?;
    let size = reader
        .seek(std::io::SeekFrom::End(0))
        .map_err(|e| LocalError::Library {
            what: "gguf: cannot measure the file",
            source: Box::new(e),
        })?;
    check_tensor_index(&ct, size)?;
    Ok(ct)
}

/// Every tensor's bytes within a file of `size` bytes, its element count without overflow.
fn check_tensor_index(ct: &Content, size: u64) -> Result<(), LocalError> {
    let mut infos: Vec<_> = ct.tensor_infos.iter().collect();
    infos.sort_by_key(|(name, info)| (info.offset, name.as_str()));
    for (name, info) in infos {
        let dims = info.shape.dims();
        let dtype = info.ggml_dtype;
        let bad = |why: String| {
            LocalError::Gguf(format!(
                "tensor `{name}` ({dtype:?}, shape {dims:?}): {why}"
            ))
        };
        let elems = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| bad("its element count overflows".into()))?;
        let block = dtype.block_size();
        if elems % block != 0 {
            return Err(bad(format!(
                "{elems} elements are not a whole number of blocks of {block}"
            )));
        }
        let bytes = (elems / block)
            .checked_mul(dtype.type_size())
            .and_then(|b| u64::try_from(b).ok())
            .ok_or_else(|| bad("its byte size overflows".into()))?;
        let start = ct.tensor_data_offset.checked_add(info.offset);
        match start.and_then(|s| s.checked_add(bytes)) {
            Some(end) if end <= size => {}
            _ => {
                return Err(bad(format!(
                    "needs {bytes} bytes from byte {}, the file has {size} (truncated?)",
                    start.map_or_else(|| "past the end".to_owned(), |s| s.to_string())
                )))
            }
        }
    }
    Ok(())
}

impl GgufVocab {
    /// Reads the tokenizer metadata.
    pub fn from_content(ct: &Content) -> Result<Self, LocalError> {
        let model = md_str(ct, "tokenizer.ggml.model")
            .ok_or_else(|| LocalError::Gguf("no `tokenizer.ggml.model` in the metadata".into()))?;
        let tokens = md_strings(ct, "tokenizer.ggml.tokens")?
            .ok_or_else(|| LocalError::Gguf("no `tokenizer.ggml.tokens` in the metadata".into()))?;
        let mut token_types = md_ints(ct, "tokenizer.ggml.token_type")?.unwrap_or_default();
        token_types.resize(tokens.len(), 1);
        let merges = md_strings(ct, "tokenizer.ggml.merges")?.unwrap_or_default();
        if tokens.is_empty() {
            return Err(LocalError::Gguf("`tokenizer.ggml.tokens` is empty".into()));
        }
        let n = tokens.len() as u32;
        let id = |key: &str| md_u32(ct, key).filter(|&i| i < n);
        let eos = id("tokenizer.ggml.eos_token_id");
        let mut stop: BTreeSet<u32> = BTreeSet::new();
        stop.extend(eos);
        stop.extend(id("tokenizer.ggml.eot_token_id"));
        stop.extend(id("tokenizer.ggml.eom_token_id"));
        for (i, t) in tokens.iter().enumerate() {
            if EOG_TEXTS.contains(&t.as_str()) {
                stop.insert(i as u32);
            }
        }
        Ok(GgufVocab {
            pre: md_str(ct, "tokenizer.ggml.pre"),
            bos: id("tokenizer.ggml.bos_token_id"),
            eos,
            stop_tokens: stop.into_iter().collect(),
            pad: id("tokenizer.ggml.padding_token_id"),
            unk: id("tokenizer.ggml.unknown_token_id"),
            add_bos: md(ct, "tokenizer.ggml.add_bos_token")
                .and_then(|v| v.to_bool().ok())
                .unwrap_or(false),
            chat_template: md_str(ct, "tokenizer.chat_template"),
            model,
            tokens,
            token_types,
            merges,
        })
    }

    /// The token's text as stored (byte-level spelling for `gpt2` vocabularies).
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Whether `id` is a control token (not text: `<|im_start|>`, `<|endoftext|>`).
    pub fn is_control(&self, id: u32) -> bool {
        self.token_types.get(id as usize) == Some(&token_type::CONTROL)
    }

    /// The `tokenizer.json` document for this vocabulary.
    pub fn tokenizer_json(&self) -> Result<String, LocalError> {
        if self.model != "gpt2" {
            return Err(LocalError::Tokenizer(format!(
                "tokenizer model `{}` is not supported from GGUF metadata (only `gpt2`, byte-level BPE); \
                 give the model's tokenizer.json instead",
                self.model
            )));
        }
        if self.merges.is_empty() {
            return Err(LocalError::Tokenizer(
                "no `tokenizer.ggml.merges` in the metadata: a byte-level BPE (`gpt2`) \
                 tokenizer needs its merges"
                    .into(),
            ));
        }
        let (pre_tokenizer, ignore_merges) = pre_tokenizer(self.pre.as_deref())?;

        let mut vocab = Map::with_capacity(self.tokens.len());
        let mut added = Vec::new();
        let mut seen = HashSet::with_capacity(self.tokens.len());
        for (id, text) in self.tokens.iter().enumerate() {
            let ty = self.token_types[id];
            // An empty or repeated text cannot be a vocabulary key: rename it to a special token
            // so the id still exists (and is never produced from text).
            let text = if text.is_empty() || !seen.insert(text.as_str()) {
                added.push(added_token(id, &format!("<|gguf_placeholder_{id}|>"), true));
                vocab.insert(format!("<|gguf_placeholder_{id}|>"), json!(id));
                continue;
            } else {
                text
            };
            vocab.insert(text.clone(), json!(id));
            match ty {
                token_type::CONTROL => added.push(added_token(id, text, true)),
                token_type::USER_DEFINED => added.push(added_token(id, text, false)),
                token_type::UNKNOWN if Some(id as u32) == self.unk => {
                    added.push(added_token(id, text, true))
                }
                _ => {}
            }
        }
        let merges: Vec<Json> = self
            .merges
            .iter()
            .map(|m| {
                // The left part may itself start with a space-like char; split after the first.
                let cut = m
                    .char_indices()
                    .skip(1)
                    .find(|&(_, c)| c == ' ')
                    .map(|(i, _)| i);
                match cut {
                    Some(i) => Ok(json!([&m[..i], &m[i + 1..]])),
                    None => Err(LocalError::Tokenizer(format!("bad merge `{m}`"))),
                }
            })
            .collect::<Result<_, _>>()?;

        let post_processor = match (self.add_bos, self.bos) {
            (true, Some(bos)) => {
                let bos_text = &self.tokens[bos as usize];
                json!({
                    "type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bos_text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [
                        {"SpecialToken": {"id": bos_text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": bos_text, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}
                    ],
                    "special_tokens": {bos_text: {"id": bos_text, "ids": [bos], "tokens": [bos_text]}}
                })
            }
            _ => Json::Null,
        };

        let doc = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {
                "type": "BPE",
                "dropout": null,
                "unk_token": null,
                "continuing_subword_prefix": null,
                "end_of_word_suffix": null,
                "fuse_unk": false,
                "byte_fallback": false,
                "ignore_merges": ignore_merges,
                "vocab": vocab,
                "merges": merges,
            }
        });
        serde_json::to_string(&doc).map_err(|e| LocalError::library("tokenizer", e))
    }
}

fn added_token(id: usize, content: &str, special: bool) -> Json {
    json!({
        "id": id,
        "content": content,
        "single_word": false,
        "lstrip": false,
        "rstrip": false,
        "normalized": false,
        "special": special,
    })
}

fn byte_level(use_regex: bool) -> Json {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split_then_bytes(regex: &str) -> Json {
    json!({
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            byte_level(false),
        ]
    })
}

/// The pre-tokenizer for llama.cpp's `tokenizer.ggml.pre` value, and whether merges are ignored
/// for whole-word vocabulary hits (as in Llama 3's tokenizer).
fn pre_tokenizer(pre: Option<&str>) -> Result<(Json, bool), LocalError> {
    let _ = GPT2_SPLIT; // the regex ByteLevel(use_regex = true) applies
    let pre = pre.unwrap_or("default");
    Ok(match pre {
        "default" | "gpt-2" | "gpt2" | "phi-2" | "jina-es" | "jina-de" | "jina-v2-es" | "jina-v2-de"
        | "jina-v2-code" | "roberta-bpe" | "olmo" | "gigachat" | "mellum" | "a.x-4.0" => (byte_level(true), false),
        // Digits one by one, then GPT-2's split (llama.cpp's STARCODER family).
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => (
            json!({
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Digits", "individual_digits": true},
                    byte_level(true),
                ]
            }),
            false,
        ),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "dbrx" | "smaug-bpe"
        | "midm-2.0" | "lfm2" => (split_then_bytes(LLAMA3_SPLIT), true),
        "qwen2" | "qwen2.5" | "deepseek-r1-qwen" | "megrez" => (split_then_bytes(QWEN2_SPLIT), false),
        "gpt-4o" | "llama4" => (split_then_bytes(GPT4O_SPLIT), false),
        other => {
            return Err(LocalError::Tokenizer(format!(
                "unknown pre-tokenizer `{other}` (tokenizer.ggml.pre); give the model's tokenizer.json instead"
            )))
        }
    })
}

/// The `tokenizer.json` document for a GGUF file's metadata.
pub fn tokenizer_json(ct: &Content) -> Result<String, LocalError> {
    GgufVocab::from_content(ct)?.tokenizer_json()
}

/// The `tokenizer.json` bytes for the GGUF file at `gguf_path` (reads only the metadata).
pub fn load_tokenizer_json(gguf_path: &Path) -> Result<Vec<u8>, LocalError> {
    Ok(tokenizer_json(&read_content(gguf_path)?)?.into_bytes())
}

/// A tokenizer built from a GGUF file, with its special tokens.
#[derive(Clone)]
pub struct GgufTokenizer {
    tokenizer: tokenizers::Tokenizer,
    vocab: GgufVocab,
    json: std::sync::Arc<str>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("model", &self.vocab.model)
            .field("pre", &self.vocab.pre)
            .field("vocab_size", &self.vocab.tokens.len())
            .field("stop_tokens", &self.vocab.stop_tokens)
            .finish()
    }
}

impl GgufTokenizer {
    /// Builds the tokenizer from the GGUF metadata.
    pub fn from_content(ct: &Content) -> Result<Self, LocalError> {
        let vocab = GgufVocab::from_content(ct)?;
        let json = vocab.tokenizer_json()?;
        Self::from_json(vocab, json)
    }

    /// Uses a given `tokenizer.json` (for vocabularies the GGUF metadata cannot describe), with
    /// the special tokens from the GGUF metadata.
    pub fn from_json_file(ct: &Content, tokenizer_json: &Path) -> Result<Self, LocalError> {
        let vocab = GgufVocab::from_content(ct)?;
        let json =
            fs::read_to_string(tokenizer_json).map_err(|e| LocalError::io(tokenizer_json, e))?;
        Self::from_json(vocab, json)
    }

    fn from_json(vocab: GgufVocab, json: String) -> Result<Self, LocalError> {
        let tokenizer = tokenizers::Tokenizer::from_bytes(json.as_bytes())
            .map_err(|e| LocalError::library("tokenizer", e))?;
        Ok(GgufTokenizer {
            tokenizer,
            vocab,
            json: json.into(),
        })
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }

    /// The metadata it was built from.
    pub fn vocab(&self) -> &GgufVocab {
        &self.vocab
    }

    /// The `tokenizer.json` document.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Number of token ids.
    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// Tokens that end generation.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.vocab.stop_tokens
    }

    /// The BOS token's text, when the vocabulary has one.
    pub fn bos_text(&self) -> Option<&str> {
        self.vocab.bos.and_then(|i| self.vocab.token(i))
    }

    /// The EOS token's text, when the vocabulary has one.
    pub fn eos_text(&self) -> Option<&str> {
        self.vocab.eos.and_then(|i| self.vocab.token(i))
    }

    /// Token ids of `text`; special-token texts in it (`<|im_start|>`) become their tokens. No BOS
    /// is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        let enc = self
            .tokenizer
            .encode_fast(text, false)
            .map_err(|e| LocalError::library("tokenizer", e))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Token ids of a rendered prompt: like [`encode`](Self::encode), with the BOS token in front
    /// when the model wants one and the text does not start with it.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        let mut ids = self.encode(text)?;
        if let (true, Some(bos)) = (self.vocab.add_bos, self.vocab.bos) {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }

    /// The text of `ids`, without special tokens.
    pub fn decode(&self, ids: &[u32]) -> Result<String, LocalError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| LocalError::library("tokenizer", e))
    }
}

impl contract_core::prompt::Tokenizer for GgufTokenizer {
    fn encode(&self, text: &str) -> Vec<u32> {
        GgufTokenizer::encode(self, text).unwrap_or_default()
    }

    fn decode(&self, ids: &[u32]) -> String {
        GgufTokenizer::decode(self, ids).unwrap_or_default()
    }
}
