//! The tokenizer and chat template built from the real SmolLM2 GGUF (fetched once into the cache).

#![cfg(feature = "local")]

use contract_backends::local::chat::ChatTemplate;
use contract_backends::local::fetch;
use contract_backends::local::gguf_tokenizer::{load_tokenizer_json, read_content, GgufTokenizer};
use contract_core::prompt::Message;

fn smollm2() -> GgufTokenizer {
    let path = fetch::fetch_default_model(&fetch::cache_dir().unwrap()).unwrap();
    GgufTokenizer::from_content(&read_content(&path).unwrap()).unwrap()
}

/// Token ids computed independently, with the Hugging Face `tokenizers` + `transformers` GGUF
/// conversion in Python (`byte_level_tokenizer` + `add_gguf_special_tokens` on this file).
const EXPECTED: &[(&str, &[u32])] = &[
    ("Hello world", &[19556, 905]),
    (
        "Año 2024: ¡12.5% más! Señora Muñoz pagó 1.234,56 €.",
        &[
            49, 22068, 216, 34, 32, 34, 36, 42, 3351, 111, 33, 34, 30, 37, 21, 283, 31798, 17,
            1268, 10214, 7138, 14099, 10214, 10012, 27891, 7342, 216, 33, 30, 34, 35, 36, 28, 37,
            38, 24927, 30,
        ],
    ),
    (
        "{\"quarter\": 3, \"low\": -12.5,\n  \"high\": null,\n  \"items\": [\"a\", \"b\"]}\n",
        &[
            39428, 31830, 1799, 216, 35, 28, 476, 683, 1799, 731, 33, 34, 30, 37, 28, 3805, 476,
            9975, 1799, 10034, 28, 3805, 476, 8416, 1799, 9523, 81, 1002, 476, 82, 3222, 109, 198,
        ],
    ),
    (
        "   spaces  \n\n\ttabs\t end",
        &[256, 5600, 256, 1116, 197, 100, 7366, 197, 1112],
    ),
    (
        "<|im_start|>user\nHi<|im_end|>\n",
        &[1, 4093, 198, 26843, 2, 198],
    ),
    ("don't I'll we've", &[12420, 982, 339, 3060, 392, 3543]),
    (
        "日本語のテキスト 🙂",
        &[
            23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100,
            226, 47526,
        ],
    ),
];

#[test]
fn ids_match_an_independent_implementation() {
    let tok = smollm2();
    for (text, ids) in EXPECTED {
        assert_eq!(tok.encode(text).unwrap(), *ids, "{text:?}");
    }
}

#[test]
fn round_trips_mixed_text() {
    let tok = smollm2();
    for (text, _) in EXPECTED.iter().filter(|(t, _)| !t.contains("<|")) {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), *text);
    }
    // Special tokens are dropped on decoding.
    let ids = tok.encode("<|im_start|>user\nHi<|im_end|>").unwrap();
    assert_eq!(tok.decode(&ids).unwrap(), "user\nHi");
}

#[test]
fn special_tokens_from_metadata() {
    let tok = smollm2();
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.vocab().pre.as_deref(), Some("smollm"));
    // eos_token_id is <|im_end|> (2); <|endoftext|> (0) also ends generation.
    assert_eq!(tok.stop_tokens(), &[0, 2]);
    assert_eq!(tok.eos_text(), Some("<|im_end|>"));
    assert_eq!(tok.bos_text(), Some("<|im_start|>"));
    // The prompt gets no extra BOS (add_bos_token is false).
    assert_eq!(tok.encode_prompt("Hi").unwrap(), tok.encode("Hi").unwrap());
}

#[test]
fn tokenizer_json_loads_elsewhere() {
    let path = fetch::fetch_default_model(&fetch::cache_dir().unwrap()).unwrap();
    let json = load_tokenizer_json(&path).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(doc["decoder"]["type"], "ByteLevel");
    assert_eq!(doc["added_tokens"].as_array().unwrap().len(), 17);
    let tok = tokenizers::Tokenizer::from_bytes(&json).unwrap();
    assert_eq!(tok.get_vocab_size(true), 49152);
}

#[test]
fn chat_template_from_the_gguf() {
    let tok = smollm2();
    let t = ChatTemplate::for_tokenizer(&tok).unwrap();
    let user_only = t.render(&[Message::user("Hi")], true).unwrap();
    assert_eq!(
        user_only,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let with_system = t
        .render(&[Message::system("S"), Message::user("U")], false)
        .unwrap();
    assert_eq!(
        with_system,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
    );
}
