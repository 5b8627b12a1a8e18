//! Hostile model files, built from the real SmolLM2 GGUF in a temporary directory: a truncated
//! file, a tensor index and hyperparameters that disagree, a tokenizer without its merges, chat
//! templates that do not compile, raise, or loop. Each is a clear error that names the file and
//! the problem, on one line, without a backtrace; nothing panics. Then a mutation loop over the
//! metadata reader, the tokenizer builder and the chat template of a small GGUF.

#![cfg(feature = "local")]

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use contract_backends::local::chat::ChatTemplate;
use contract_backends::local::fetch;
use contract_backends::local::gguf_tokenizer::{read_content, read_content_from, GgufTokenizer};
use contract_backends::local::{LocalBackend, LocalError, LocalOptions};
use contract_core::prompt::Message;

/// The real file's bytes, read once.
fn smollm2() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = fetch::default_model_path().expect("the default model (SmolLM2)");
        std::fs::read(path).expect("the model file")
    })
}

fn dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contract-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, bytes).expect("write a hostile file");
    path
}

/// Where the value of metadata key `key` starts: after its length-prefixed name and its type
/// (which must be `ty`).
fn value_at(bytes: &[u8], key: &str, ty: u32) -> usize {
    let mut pattern = (key.len() as u64).to_le_bytes().to_vec();
    pattern.extend_from_slice(key.as_bytes());
    pattern.extend_from_slice(&ty.to_le_bytes());
    let at = bytes
        .windows(pattern.len())
        .position(|w| w == pattern.as_slice())
        .unwrap_or_else(|| panic!("no `{key}` of type {ty} in the file"));
    at + pattern.len()
}

/// The file with the u32 value of `key` replaced.
fn with_u32(key: &str, value: u32) -> Vec<u8> {
    let mut bytes = smollm2().to_vec();
    let at = value_at(&bytes, key, 4);
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    bytes
}

/// The file with the chat template replaced by `template`, padded with a Jinja comment to the
/// original length (so every offset after it stays valid).
fn with_template(template: &str) -> Vec<u8> {
    let mut bytes = smollm2().to_vec();
    let at = value_at(&bytes, "tokenizer.chat_template", 8);
    let len = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")) as usize;
    let pad = len
        .checked_sub(template.len() + 4)
        .expect("the original template is longer");
    let text = format!("{template}{{#{}#}}", " ".repeat(pad));
    assert_eq!(text.len(), len);
    bytes[at + 8..at + 8 + len].copy_from_slice(text.as_bytes());
    bytes
}

/// Loading `path` fails; the message names the file and says `problem`, on one line, with no
/// backtrace in it (Candle appends one when `RUST_BACKTRACE` is set, as it is here).
fn load_error(path: &Path, problem: &str) -> LocalError {
    std::env::set_var("RUST_BACKTRACE", "1");
    let loaded = LocalBackend::with_options(path, LocalOptions::default());
    let _ = std::fs::remove_file(path);
    let err = match loaded {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e,
    };
    let message = err.to_string();
    let debug = format!("{err:?}");
    eprintln!("{message}");
    assert!(
        message.starts_with(&path.display().to_string()),
        "the file is not named: {message}"
    );
    assert!(message.contains(problem), "{message}");
    assert!(!message.contains('\n'), "more than one line: {message}");
    for text in [&message, &debug] {
        assert!(
            !text.contains("backtrace") && !text.contains("rust_begin_unwind"),
            "a backtrace: {text}"
        );
    }
    err
}

#[test]
fn truncated_files_name_the_file_and_the_cut() {
    let bytes = smollm2();
    let ct = read_content(&fetch::default_model_path().expect("model")).expect("the real file");
    let data = ct.tensor_data_offset as usize;
    let cuts = [
        (10, "cannot read the header"),
        (1 << 20, "cannot read the header, metadata or tensor index"),
        (data + 100, "truncated?"),
        (bytes.len() / 2, "truncated?"),
        (bytes.len() - 1, "truncated?"),
    ];
    for (i, (len, problem)) in cuts.into_iter().enumerate() {
        let path = write(&format!("truncated-{i}.gguf"), &bytes[..len]);
        let err = load_error(&path, problem);
        assert!(matches!(err, LocalError::File { .. }), "{err:?}");
        if problem == "truncated?" {
            assert!(err.to_string().contains("tensor `"), "{err}");
        }
        if problem.starts_with("cannot read the header") {
            // The file's error, then Candle's: the cause is kept, not flattened into a message.
            let candle = std::error::Error::source(&err).and_then(std::error::Error::source);
            assert!(candle.is_some(), "no cause kept: {err:?}");
        }
    }
}

#[test]
fn tensor_shapes_that_disagree_with_the_metadata() {
    // 585 = 9 heads of 65: a valid layout, but not the embedding's 576 columns.
    let path = write(
        "embedding-length.gguf",
        &with_u32("llama.embedding_length", 585),
    );
    load_error(
        &path,
        "tensor `token_embd.weight` has shape [49152, 576], `llama.embedding_length` is 585",
    );

    // A tensor index entry with half its rows: the file is long enough, the shape is wrong.
    let mut bytes = smollm2().to_vec();
    let mut pattern = (19u64).to_le_bytes().to_vec();
    pattern.extend_from_slice(b"blk.0.attn_q.weight");
    let at = bytes
        .windows(pattern.len())
        .position(|w| w == pattern.as_slice())
        .expect("the tensor's index entry")
        + pattern.len();
    assert_eq!(&bytes[at..at + 4], &2u32.to_le_bytes(), "two dimensions");
    bytes[at + 12..at + 20].copy_from_slice(&288u64.to_le_bytes());
    let path = write("attn-q-shape.gguf", &bytes);
    load_error(&path, "tensor `blk.0.attn_q.weight` has shape [288, 576]");

    let path = write("no-heads.gguf", &with_u32("llama.attention.head_count", 0));
    load_error(&path, "do not divide into attention heads");
    let path = write("blocks.gguf", &with_u32("llama.block_count", 4_000_000_000));
    load_error(
        &path,
        "`llama.block_count` is 4000000000, the tensor index does not hold that many blocks",
    );
    let path = write("context.gguf", &with_u32("llama.context_length", u32::MAX));
    load_error(&path, "`llama.context_length` 4294967295 is outside");
}

#[test]
fn a_tokenizer_without_its_merges() {
    // Renamed in place (same length): the metadata has no merges any more.
    let mut bytes = smollm2().to_vec();
    let at = value_at(&bytes, "tokenizer.ggml.merges", 9);
    let name = at - 4 - "tokenizer.ggml.merges".len();
    bytes[name..name + 21].copy_from_slice(b"tokenizer.ggml.mergez");
    let path = write("no-merges.gguf", &bytes);
    load_error(&path, "no `tokenizer.ggml.merges` in the metadata");

    // The first merge names a token the vocabulary does not have.
    let mut bytes = smollm2().to_vec();
    let at = value_at(&bytes, "tokenizer.ggml.merges", 9);
    assert_eq!(
        &bytes[at..at + 4],
        &8u32.to_le_bytes(),
        "an array of strings"
    );
    let first = at + 4 + 8;
    let len = u64::from_le_bytes(bytes[first..first + 8].try_into().expect("8 bytes")) as usize;
    let fake = format!("q {}", "~".repeat(len - 2));
    bytes[first + 8..first + 8 + len].copy_from_slice(fake.as_bytes());
    let path = write("bad-merge.gguf", &bytes);
    load_error(&path, "tokenizer: ");
}

#[test]
fn chat_templates_that_fail() {
    let cases = [
        ("syntax", "{% for %}", "chat template: "),
        (
            "raise",
            "{{ raise_exception('this template refuses') }}",
            "this template refuses",
        ),
        (
            "loop",
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
            "did not finish within 1000000 instructions",
        ),
        (
            "recursion",
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "chat template: ",
        ),
    ];
    for (name, template, problem) in cases {
        let path = write(&format!("template-{name}.gguf"), &with_template(template));
        let err = load_error(&path, problem);
        // The template engine's own error is kept as the cause (all but the fuel limit, which
        // is this crate's message).
        let mut chain: Vec<&(dyn std::error::Error + 'static)> = Vec::new();
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&err);
        while let Some(e) = next {
            chain.push(e);
            next = e.source();
        }
        let kept = chain
            .iter()
            .any(|e| e.downcast_ref::<minijinja::Error>().is_some());
        assert_eq!(kept, name != "loop", "{name}: {chain:?}");
    }
}

/// A GGUF with only metadata: the real tokenizer cut to its first `n` tokens and the merges among
/// them, the real chat template, and the llama hyperparameters.
fn small_gguf(n: usize) -> Vec<u8> {
    let mut cursor = Cursor::new(smollm2());
    let ct = read_content_from(&mut cursor).expect("the real file");
    let strings = |key: &str| -> Vec<String> {
        ct.metadata[key]
            .to_vec()
            .expect("an array")
            .iter()
            .map(|v| v.to_string().expect("a string").clone())
            .collect()
    };
    let tokens: Vec<String> = strings("tokenizer.ggml.tokens")
        .into_iter()
        .take(n)
        .collect();
    let known: std::collections::HashSet<&str> = tokens.iter().map(String::as_str).collect();
    let merges: Vec<String> = strings("tokenizer.ggml.merges")
        .into_iter()
        .filter(|m| {
            m.split_once(' ').is_some_and(|(a, b)| {
                known.contains(a) && known.contains(b) && known.contains(format!("{a}{b}").as_str())
            })
        })
        .collect();
    assert!(merges.len() > 10, "{} merges", merges.len());
    let types: Vec<Value> = ct.metadata["tokenizer.ggml.token_type"]
        .to_vec()
        .expect("types")
        .iter()
        .take(n)
        .cloned()
        .collect();
    let array = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    let mut md: Vec<(String, Value)> = ct
        .metadata
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "tokenizer.ggml.tokens" | "tokenizer.ggml.merges" | "tokenizer.ggml.token_type"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.push(("tokenizer.ggml.tokens".into(), array(tokens)));
    md.push(("tokenizer.ggml.merges".into(), array(merges)));
    md.push(("tokenizer.ggml.token_type".into(), Value::Array(types)));
    md.sort_by(|a, b| a.0.cmp(&b.0));
    let refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    // Two small tensors, so the tensor index is read and checked too.
    let tensor = |rows: usize, dtype: GgmlDType| {
        let t = Tensor::zeros((rows, 32), DType::F32, &Device::Cpu).expect("zeros");
        QTensor::quantize(&t, dtype).expect("a tensor")
    };
    let tensors = [
        ("token_embd.weight", tensor(8, GgmlDType::Q8_0)),
        ("output_norm.weight", tensor(1, GgmlDType::F32)),
    ];
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (*k, v)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &refs, &tensors).expect("a small gguf");
    out.into_inner()
}

/// Everything a model file's metadata goes through before a model runs: the reader, the
/// tokenizer builder, encoding and decoding, the chat template.
fn pipeline(bytes: &[u8]) -> Result<(), LocalError> {
    let ct = read_content_from(&mut Cursor::new(bytes))?;
    let tok = GgufTokenizer::from_content(&ct)?;
    let ids = tok.encode("Revenue of €7.2 million in Q3 2025, <|im_start|>user\n")?;
    tok.decode(&ids)?;
    let template = ChatTemplate::for_tokenizer(&tok)?;
    template.render(&[Message::system("s"), Message::user("u")], true)?;
    Ok(())
}

/// One to four random edits of `bytes`: a flipped byte, a length or count overwritten with a
/// small or a huge number, a cut, a duplicated or a removed range.
fn mutate(bytes: &mut Vec<u8>, next: &mut impl FnMut() -> u64) {
    for _ in 0..1 + next() % 4 {
        let len = bytes.len().max(1) as u64;
        let at = (next() % len) as usize;
        match next() % 6 {
            0 => {
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << (next() % 8);
                }
            }
            1 | 2 => {
                let values = [0u64, 1, 2, 255, 1 << 31, u32::MAX as u64, u64::MAX, next()];
                let v = values[(next() % values.len() as u64) as usize];
                let width = if next().is_multiple_of(2) { 8 } else { 4 };
                if at + width <= bytes.len() {
                    bytes[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
                }
            }
            3 => bytes.truncate(at),
            4 => {
                let end = (at + (next() % 64) as usize).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            _ => {
                let end = (at + (next() % 64) as usize).min(bytes.len());
                bytes.drain(at..end);
            }
        }
    }
}

/// Mutated small GGUFs never panic: each ends in a value or an error. `CONTRACT_MUTATIONS` sets
/// the number of files (default 400) and `CONTRACT_MUTATION_SEED` the seed (600,000 files with
/// seed 7 ran without a panic); a file that panics is written to the temporary directory and
/// named in the failure, to keep as a regression case. With `CONTRACT_FUZZ_SEEDS=DIR` the
/// starting files (the SmolLM2 metadata cut to 300 and 600 tokens) are also written to `DIR`,
/// as the seeds of the cargo-fuzz target in `fuzz/` (derived from the model, so not committed).
#[test]
fn metadata_mutations_never_panic() {
    let original = small_gguf(600);
    pipeline(&original).expect("the small file is valid");
    if let Some(dir) = std::env::var_os("CONTRACT_FUZZ_SEEDS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("seed directory");
        for n in [300, 600] {
            std::fs::write(dir.join(format!("smollm2-{n}.gguf")), small_gguf(n)).expect("seed");
        }
    }
    let runs: u64 = std::env::var("CONTRACT_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let mut seed: u64 = std::env::var("CONTRACT_MUTATION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_CAFE_F00D_0001);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut ok, mut errors) = (0, 0);
    let mut panics = Vec::new();
    for run in 0..runs {
        let mut bytes = original.clone();
        mutate(&mut bytes, &mut next);
        match catch_unwind(AssertUnwindSafe(|| pipeline(&bytes))) {
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty());
                errors += 1;
            }
            Err(_) => panics.push(write(&format!("panic-{run}.gguf"), &bytes)),
        }
    }
    println!(
        "{runs} mutated files: {ok} loaded, {errors} errors, {} panics",
        panics.len()
    );
    assert!(panics.is_empty(), "panics on {panics:?}");
    assert!(errors > 0, "no mutation was caught");
}
