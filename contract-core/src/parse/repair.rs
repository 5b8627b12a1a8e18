//! Deterministic syntax repairs of one object: a small recursive-descent reader that copies what
//! is valid JSON and rewrites only what is listed in [`RepairKind`], recording each rewrite.
//!
//! It never guesses meaning: a number followed by anything but a delimiter (`7,230`, `12 USD`),
//! an unknown word, a missing comma or a bad escape ends the attempt.

use serde::{Deserialize, Serialize};

/// Nesting limit, as serde_json's: deeper input is not an answer.
const MAX_DEPTH: usize = 128;

/// What a repair changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// Removed a comma before `}` or `]` (or at the end of a truncated object).
    TrailingComma,
    /// Rewrote a single-quoted string with double quotes.
    SingleQuotes,
    /// Rewrote Python's `None`, `True` or `False` as `null`, `true` or `false`.
    PythonLiteral,
    /// Quoted a bare identifier key.
    UnquotedKey,
    /// Removed a `//` or `/* */` comment.
    Comment,
    /// Escaped a raw control character (a line break) inside a string.
    ControlCharacter,
    /// Closed a string the text ends inside (an object's member; a list's element the text
    /// ends inside is dropped instead, [`RepairKind::DroppedTruncated`]).
    ClosedString,
    /// Closed an object or array the text ends inside.
    ClosedBracket,
    /// Dropped a member the text ends inside before it had a complete value (a key without
    /// value, a number or word that may be cut short), or a list's last element the text ends
    /// inside (an item half written when the reply was cut: the list keeps its whole items).
    DroppedTruncated,
}

impl RepairKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::TrailingComma => "trailing_comma",
            RepairKind::SingleQuotes => "single_quotes",
            RepairKind::PythonLiteral => "python_literal",
            RepairKind::UnquotedKey => "unquoted_key",
            RepairKind::Comment => "comment",
            RepairKind::ControlCharacter => "control_character",
            RepairKind::ClosedString => "closed_string",
            RepairKind::ClosedBracket => "closed_bracket",
            RepairKind::DroppedTruncated => "dropped_truncated",
        }
    }
}

/// One repair: what, and where (byte offset in the raw reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// What was changed.
    pub kind: RepairKind,
    /// Byte offset in the raw reply.
    pub offset: usize,
}

/// A repaired object: valid JSON text, where it ended, and the repairs.
#[derive(Debug)]
pub(crate) struct Repaired {
    pub text: String,
    pub end: usize,
    pub repairs: Vec<Repair>,
}

/// Where and why an attempt failed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure {
    pub at: usize,
    pub why: &'static str,
}

enum Value {
    /// Complete.
    Done,
    /// Completed by closing it at the end of the text.
    Closed,
    /// The text ends inside it and it cannot be completed: drop it.
    Cut,
}

struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    out: String,
    repairs: Vec<Repair>,
    base: usize,
    depth: usize,
}

/// Reads the object starting at byte `start` of `s` (which holds `{`); offsets in repairs are
/// `base + position in s`.
pub(crate) fn repair_object(s: &str, start: usize, base: usize) -> Result<Repaired, Failure> {
    let mut r = Reader {
        s,
        b: s.as_bytes(),
        pos: start,
        out: String::new(),
        repairs: Vec::new(),
        base,
        depth: 0,
    };
    r.object()?;
    Ok(Repaired {
        text: r.out,
        end: r.pos,
        repairs: r.repairs,
    })
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

impl Reader<'_> {
    fn eof(&self) -> bool {
        self.pos >= self.b.len()
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn fail<T>(&self, why: &'static str) -> Result<T, Failure> {
        Err(Failure { at: self.pos, why })
    }

    fn record(&mut self, kind: RepairKind, at: usize) {
        self.repairs.push(Repair {
            kind,
            offset: self.base + at,
        });
    }

    /// Skips JSON whitespace and comments.
    fn skip(&mut self) -> Result<(), Failure> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') => {
                    let at = self.pos;
                    match self.b.get(at + 1) {
                        Some(b'/') => {
                            self.pos = self.s[at..].find('\n').map_or(self.b.len(), |i| at + i);
                        }
                        Some(b'*') => {
                            self.pos = self.s[at + 2..]
                                .find("*/")
                                .map_or(self.b.len(), |i| at + 2 + i + 2);
                        }
                        _ => return self.fail("unexpected `/`"),
                    }
                    self.record(RepairKind::Comment, at);
                }
                _ => return Ok(()),
            }
        }
    }

    fn close(&mut self, bracket: char) {
        self.record(RepairKind::ClosedBracket, self.pos);
        self.out.push(bracket);
        self.depth -= 1;
    }

    fn value(&mut self) -> Result<Value, Failure> {
        match self.peek() {
            None => Ok(Value::Cut),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(q @ (b'"' | b'\'')) => self.string(q),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(c) if c.is_ascii_alphabetic() => self.literal(),
            Some(_) => self.fail("expected a value"),
        }
    }

    fn object(&mut self) -> Result<Value, Failure> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail("nested too deeply");
        }
        self.out.push('{');
        self.pos += 1;
        let mut first = true;
        let mut comma: Option<usize> = None;
        loop {
            self.skip()?;
            let Some(c) = self.peek() else {
                if let Some(at) = comma {
                    self.record(RepairKind::TrailingComma, at);
                }
                self.close('}');
                return Ok(Value::Closed);
            };
            if c == b'}' {
                if let Some(at) = comma {
                    self.record(RepairKind::TrailingComma, at);
                }
                self.out.push('}');
                self.pos += 1;
                self.depth -= 1;
                return Ok(Value::Done);
            }
            if !first && comma.is_none() {
                return self.fail("expected `,` or `}`");
            }
            let member_out = self.out.len();
            let member_repairs = self.repairs.len();
            let member_at = self.pos;
            if comma.take().is_some() {
                self.out.push(',');
            }
            let key = match c {
                b'"' | b'\'' => self.string(c)?,
                c if is_ident_start(c) => self.bare_key(),
                _ => return self.fail("expected a key"),
            };
            let mut cut = !matches!(key, Value::Done);
            if !cut {
                self.skip()?;
                match self.peek() {
                    None => cut = true,
                    Some(b':') => {
                        self.out.push(':');
                        self.pos += 1;
                        self.skip()?;
                        match self.value()? {
                            Value::Done => {}
                            Value::Closed => {
                                self.close('}');
                                return Ok(Value::Closed);
                            }
                            Value::Cut => cut = true,
                        }
                    }
                    Some(_) => return self.fail("expected `:`"),
                }
            }
            if cut {
                self.out.truncate(member_out);
                self.repairs.truncate(member_repairs);
                self.record(RepairKind::DroppedTruncated, member_at);
                self.close('}');
                return Ok(Value::Closed);
            }
            first = false;
            self.skip()?;
            match self.peek() {
                Some(b',') => {
                    comma = Some(self.pos);
                    self.pos += 1;
                }
                Some(b'}') | None => {}
                Some(_) => return self.fail("expected `,` or `}`"),
            }
        }
    }

    fn array(&mut self) -> Result<Value, Failure> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail("nested too deeply");
        }
        self.out.push('[');
        self.pos += 1;
        let mut first = true;
        let mut comma: Option<usize> = None;
        loop {
            self.skip()?;
            let Some(c) = self.peek() else {
                if let Some(at) = comma {
                    self.record(RepairKind::TrailingComma, at);
                }
                self.close(']');
                return Ok(Value::Closed);
            };
            if c == b']' {
                if let Some(at) = comma {
                    self.record(RepairKind::TrailingComma, at);
                }
                self.out.push(']');
                self.pos += 1;
                self.depth -= 1;
                return Ok(Value::Done);
            }
            if !first && comma.is_none() {
                return self.fail("expected `,` or `]`");
            }
            let element_out = self.out.len();
            let element_repairs = self.repairs.len();
            let element_at = self.pos;
            if comma.take().is_some() {
                self.out.push(',');
            }
            match self.value()? {
                Value::Done => {}
                // The text ends inside the element: a string or an item cut short (a reply
                // stopped by its token limit) is not an item the model wrote, so the list ends
                // with its last whole element.
                Value::Closed | Value::Cut => {
                    self.out.truncate(element_out);
                    self.repairs.truncate(element_repairs);
                    self.record(RepairKind::DroppedTruncated, element_at);
                    self.close(']');
                    return Ok(Value::Closed);
                }
            }
            first = false;
            self.skip()?;
            match self.peek() {
                Some(b',') => {
                    comma = Some(self.pos);
                    self.pos += 1;
                }
                Some(b']') | None => {}
                Some(_) => return self.fail("expected `,` or `]`"),
            }
        }
    }

    /// An identifier key; cut when the text ends inside it.
    fn bare_key(&mut self) -> Value {
        let start = self.pos;
        while self.peek().is_some_and(is_ident) {
            self.pos += 1;
        }
        if self.eof() {
            return Value::Cut;
        }
        self.record(RepairKind::UnquotedKey, start);
        self.out.push('"');
        self.out.push_str(&self.s[start..self.pos]);
        self.out.push('"');
        Value::Done
    }

    fn string(&mut self, quote: u8) -> Result<Value, Failure> {
        let single = quote == b'\'';
        if single {
            self.record(RepairKind::SingleQuotes, self.pos);
        }
        self.out.push('"');
        self.pos += 1;
        loop {
            let Some(c) = self.s[self.pos..].chars().next() else {
                self.record(RepairKind::ClosedString, self.pos);
                self.out.push('"');
                return Ok(Value::Closed);
            };
            match c {
                _ if c as u32 == u32::from(quote) => {
                    self.pos += 1;
                    self.out.push('"');
                    return Ok(Value::Done);
                }
                '\\' => {
                    let Some(&e) = self.b.get(self.pos + 1) else {
                        self.pos += 1;
                        self.record(RepairKind::ClosedString, self.pos);
                        self.out.push('"');
                        return Ok(Value::Closed);
                    };
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            self.out.push('\\');
                            self.out.push(char::from(e));
                            self.pos += 2;
                        }
                        b'\'' if single => {
                            self.out.push('\'');
                            self.pos += 2;
                        }
                        b'u' => {
                            let hex = self.b.get(self.pos + 2..self.pos + 6);
                            match hex {
                                Some(h) if h.iter().all(u8::is_ascii_hexdigit) => {
                                    self.out.push_str(&self.s[self.pos..self.pos + 6]);
                                    self.pos += 6;
                                }
                                None if self.b[self.pos + 2..]
                                    .iter()
                                    .all(u8::is_ascii_hexdigit) =>
                                {
                                    self.pos = self.b.len();
                                    self.record(RepairKind::ClosedString, self.pos);
                                    self.out.push('"');
                                    return Ok(Value::Closed);
                                }
                                _ => return self.fail("invalid `\\u` escape"),
                            }
                        }
                        _ => return self.fail("invalid escape"),
                    }
                }
                '"' => {
                    self.out.push_str("\\\"");
                    self.pos += 1;
                }
                c if (c as u32) < 0x20 => {
                    self.record(RepairKind::ControlCharacter, self.pos);
                    match c {
                        '\n' => self.out.push_str("\\n"),
                        '\r' => self.out.push_str("\\r"),
                        '\t' => self.out.push_str("\\t"),
                        c => self.out.push_str(&format!("\\u{:04x}", c as u32)),
                    }
                    self.pos += 1;
                }
                c => {
                    self.out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    /// A JSON number, copied as written; cut when the text ends inside or right after it (the
    /// digits may be cut short).
    fn number(&mut self) -> Result<Value, Failure> {
        let start = self.pos;
        let digits = |r: &mut Self| {
            let from = r.pos;
            while r.peek().is_some_and(|c| c.is_ascii_digit()) {
                r.pos += 1;
            }
            r.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            None => return Ok(Value::Cut),
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            Some(_) => return self.fail("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return if self.eof() {
                    Ok(Value::Cut)
                } else {
                    self.fail("invalid number")
                };
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return if self.eof() {
                    Ok(Value::Cut)
                } else {
                    self.fail("invalid number")
                };
            }
        }
        match self.peek() {
            None => Ok(Value::Cut),
            Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b'}' | b']' | b'/') => {
                self.out.push_str(&self.s[start..self.pos]);
                Ok(Value::Done)
            }
            Some(_) => self.fail("unexpected character after a number"),
        }
    }

    fn literal(&mut self) -> Result<Value, Failure> {
        let start = self.pos;
        while self.peek().is_some_and(is_ident) {
            self.pos += 1;
        }
        let word = &self.s[start..self.pos];
        let json = match word {
            "true" | "false" | "null" => word,
            "True" => "true",
            "False" => "false",
            "None" => "null",
            _ => {
                const WORDS: [&str; 6] = ["true", "false", "null", "True", "False", "None"];
                if self.eof() && WORDS.iter().any(|w| w.starts_with(word)) {
                    return Ok(Value::Cut);
                }
                self.pos = start;
                return self.fail("unknown word");
            }
        };
        if json != word {
            self.record(RepairKind::PythonLiteral, start);
        }
        self.out.push_str(json);
        Ok(Value::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &str) -> Result<(String, Vec<RepairKind>), usize> {
        repair_object(s, 0, 0)
            .map(|r| (r.text, r.repairs.iter().map(|r| r.kind).collect()))
            .map_err(|f| f.at)
    }

    #[test]
    fn repairs() {
        use RepairKind::*;
        assert_eq!(
            run(r#"{"a": 1,}"#),
            Ok((r#"{"a":1}"#.into(), vec![TrailingComma]))
        );
        assert_eq!(
            run("{'a': 'it\\'s \"x\"'}"),
            Ok((
                r#"{"a":"it's \"x\""}"#.into(),
                vec![SingleQuotes, SingleQuotes]
            ))
        );
        assert_eq!(
            run("{a: None, b: True} tail"),
            Ok((
                r#"{"a":null,"b":true}"#.into(),
                vec![UnquotedKey, PythonLiteral, UnquotedKey, PythonLiteral]
            ))
        );
        assert_eq!(
            run("{\"a\": 1 // one\n /* two */}"),
            Ok((r#"{"a":1}"#.into(), vec![Comment, Comment]))
        );
        assert_eq!(
            run(r#"{"a": [1, {"b": "x"#),
            Ok((
                r#"{"a":[1]}"#.into(),
                vec![DroppedTruncated, ClosedBracket, ClosedBracket]
            ))
        );
        assert_eq!(
            run(r#"{"a": {"b": "x"#),
            Ok((
                r#"{"a":{"b":"x"}}"#.into(),
                vec![ClosedString, ClosedBracket, ClosedBracket]
            ))
        );
        assert_eq!(
            run(r#"{"a": ["one", "tw"#),
            Ok((
                r#"{"a":["one"]}"#.into(),
                vec![DroppedTruncated, ClosedBracket, ClosedBracket]
            ))
        );
        assert_eq!(
            run(r#"{"a": 1, "b": 76"#),
            Ok((r#"{"a":1}"#.into(), vec![DroppedTruncated, ClosedBracket]))
        );
        assert_eq!(
            run(r#"{"a": 1, "b"#),
            Ok((r#"{"a":1}"#.into(), vec![DroppedTruncated, ClosedBracket]))
        );
        assert_eq!(
            run("{\"a\": \"x\ny\"}").map(|r| r.0),
            Ok(r#"{"a":"x\ny"}"#.into())
        );
    }

    #[test]
    fn never_guesses_meaning() {
        assert!(run(r#"{"low": 7,230, "high": 7,650}"#).is_err());
        assert!(run(r#"{"low": 7230 USD}"#).is_err());
        assert!(run(r#"{"low": 01}"#).is_err());
        assert!(run(r#"{"a": 1 "b": 2}"#).is_err());
        assert!(run(r#"{"a": undefined}"#).is_err());
    }

    #[test]
    fn depth_is_bounded() {
        let deep = "{\"a\":".repeat(1000);
        assert!(run(&deep).is_err());
        let ok = "{\"a\":".repeat(100);
        assert!(run(&ok).is_ok());
    }
}
