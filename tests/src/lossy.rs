//! A lossy tokenizer for budget tests (decoding does not give the text back) and documents of
//! a given number of words.

use std::collections::HashMap;
use std::sync::Mutex;

use contract_core::prompt::Tokenizer;

/// One id per whitespace-separated word (interned on first sight); decoding joins the words with
/// single spaces, so tabs, CRLF, blank lines and runs of spaces never come back. A budget fitter
/// that trusts `decode(encode(text)) == text` cannot find its cut with it.
#[derive(Debug, Default)]
pub struct Lossy {
    words: Mutex<(HashMap<String, u32>, Vec<String>)>,
}

impl Tokenizer for Lossy {
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut guard = self.words.lock().unwrap_or_else(|e| e.into_inner());
        let (ids, words) = &mut *guard;
        text.split_whitespace()
            .map(|w| {
                if let Some(&id) = ids.get(w) {
                    return id;
                }
                let id = u32::try_from(words.len()).unwrap_or(u32::MAX);
                words.push(w.to_owned());
                ids.insert(w.to_owned(), id);
                id
            })
            .collect()
    }

    fn decode(&self, ids: &[u32]) -> String {
        let guard = self.words.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter()
            .filter_map(|&id| guard.1.get(id as usize).map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A document of exactly `words` words on lines of 1 to 16 words; with `irregular`, lines are
/// separated by LF or CRLF, words by spaces or tabs, with blank and space-only lines between.
pub fn word_document(words: usize, irregular: bool) -> String {
    let vocab = [
        "revenue", "guidance", "the", "quarter", "€7.2", "million", "naïve", "to", "of", "USD",
        "between", "growth", "margin", "cash", "flow", "2025",
    ];
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D ^ words as u64 ^ u64::from(irregular);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut doc = String::new();
    let mut written = 0;
    while written < words {
        let n = (1 + (next() % 16) as usize).min(words - written);
        for i in 0..n {
            if i > 0 {
                doc.push_str(match (irregular, next() % 4) {
                    (true, 0) => "\t",
                    (true, 1) => "   ",
                    _ => " ",
                });
            }
            doc.push_str(vocab[(next() % vocab.len() as u64) as usize]);
        }
        written += n;
        doc.push_str(match (irregular, next() % 5) {
            (true, 0) => "\r\n",
            (true, 1) => "\n\n",
            (true, 2) => "\r\n \t \r\n",
            _ => "\n",
        });
    }
    doc
}
