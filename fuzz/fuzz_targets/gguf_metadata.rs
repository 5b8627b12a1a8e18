//! GGUF bytes through everything their metadata goes through before a model runs: the metadata
//! and tensor-index reader, the tokenizer builder, encoding and decoding, the chat template.
//! Any input must end in a value or an error, never a panic or an abort.

#![no_main]

use std::io::Cursor;

use contract_backends::local::chat::ChatTemplate;
use contract_backends::local::gguf_tokenizer::{read_content_from, GgufTokenizer};
use contract_core::prompt::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(ct) = read_content_from(&mut Cursor::new(data)) else {
        return;
    };
    let Ok(tok) = GgufTokenizer::from_content(&ct) else {
        return;
    };
    if let Ok(ids) = tok.encode("Revenue of €7.2 million in Q3 2025, <|im_start|>user\n") {
        let _ = tok.decode(&ids);
    }
    if let Ok(template) = ChatTemplate::for_tokenizer(&tok) {
        let _ = template.render(&[Message::system("s"), Message::user("u")], true);
    }
});
