//! The text cut into tokens: letter runs, ASCII digit runs, whitespace runs and single other
//! characters, each with its byte range. Every reader is a small grammar over these tokens, so
//! a finder and its reader accept exactly the same expressions.

use std::borrow::Cow;
use std::ops::Range;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A run of letters (`char::is_alphabetic`).
    Word,
    /// A run of ASCII digits.
    Num,
    /// A run of whitespace (newlines included).
    Space,
    /// One other character (punctuation, a symbol, a non-ASCII digit).
    Other,
}

fn kind_of(c: char) -> Kind {
    if c.is_ascii_digit() {
        Kind::Num
    } else if c.is_alphabetic() {
        Kind::Word
    } else if c.is_whitespace() {
        Kind::Space
    } else {
        Kind::Other
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Tok<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// The text lowercased (borrowed when it already is).
    pub lower: Cow<'a, str>,
    pub start: usize,
    pub end: usize,
}

/// A text's tokens.
#[derive(Debug, Clone)]
pub(crate) struct Toks<'a> {
    pub text: &'a str,
    pub t: Vec<Tok<'a>>,
}

impl<'a> Toks<'a> {
    pub fn new(text: &'a str) -> Toks<'a> {
        let mut t = Vec::new();
        let mut it = text.char_indices().peekable();
        while let Some((start, c)) = it.next() {
            let kind = kind_of(c);
            let mut end = start + c.len_utf8();
            if kind != Kind::Other {
                while let Some(&(j, d)) = it.peek() {
                    if kind_of(d) != kind {
                        break;
                    }
                    end = j + d.len_utf8();
                    it.next();
                }
            }
            let piece = &text[start..end];
            let lower = if kind == Kind::Word && piece.chars().any(char::is_uppercase) {
                Cow::Owned(piece.to_lowercase())
            } else {
                Cow::Borrowed(piece)
            };
            t.push(Tok {
                kind,
                text: piece,
                lower,
                start,
                end,
            });
        }
        Toks { text, t }
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn kind(&self, i: usize) -> Option<Kind> {
        self.t.get(i).map(|t| t.kind)
    }

    /// The lowercased word at `i`.
    pub fn word(&self, i: usize) -> Option<&str> {
        self.t
            .get(i)
            .filter(|t| t.kind == Kind::Word)
            .map(|t| t.lower.as_ref())
    }

    pub fn is_word(&self, i: usize, w: &str) -> bool {
        self.word(i) == Some(w)
    }

    /// `i + 1` when the word at `i` is one of `words`.
    pub fn word_in(&self, i: usize, words: &[&str]) -> Option<usize> {
        let w = self.word(i)?;
        words.contains(&w).then_some(i + 1)
    }

    /// The digits at `i`.
    pub fn num(&self, i: usize) -> Option<&'a str> {
        self.t
            .get(i)
            .filter(|t| t.kind == Kind::Num)
            .map(|t| t.text)
    }

    /// The digits at `i` as a number, when there are at most `max` of them.
    pub fn num_upto(&self, i: usize, max: usize) -> Option<(u32, usize)> {
        let d = self.num(i)?;
        if d.len() > max || d.len() > 9 {
            return None;
        }
        Some((d.parse().ok()?, d.len()))
    }

    pub fn is_other(&self, i: usize, c: char) -> bool {
        self.t
            .get(i)
            .is_some_and(|t| t.kind == Kind::Other && t.text.starts_with(c))
    }

    /// The other character at `i`.
    pub fn other(&self, i: usize) -> Option<char> {
        self.t
            .get(i)
            .filter(|t| t.kind == Kind::Other)
            .and_then(|t| t.text.chars().next())
    }

    /// `i + 1` when `i` is whitespace, else `i`.
    pub fn sp(&self, i: usize) -> usize {
        if self.kind(i) == Some(Kind::Space) {
            i + 1
        } else {
            i
        }
    }

    /// `i + 1` when `i` is whitespace, else nothing.
    pub fn sp_req(&self, i: usize) -> Option<usize> {
        (self.kind(i) == Some(Kind::Space)).then_some(i + 1)
    }

    /// After optional whitespace, an optional comma and optional whitespace.
    pub fn gap(&self, i: usize) -> usize {
        let j = self.sp(i);
        if self.is_other(j, ',') {
            self.sp(j + 1)
        } else {
            j
        }
    }

    /// Words `ws` in order, whitespace between them, starting at `i`; the index after the last.
    pub fn words(&self, i: usize, ws: &[&str]) -> Option<usize> {
        let mut j = i;
        for (k, w) in ws.iter().enumerate() {
            if k > 0 {
                j = self.sp_req(j)?;
            }
            if !self.is_word(j, w) {
                return None;
            }
            j += 1;
        }
        Some(j)
    }

    /// The byte range of tokens `a..b` (`a < b`).
    pub fn range(&self, a: usize, b: usize) -> Range<usize> {
        let start = self.t.get(a).map_or(self.text.len(), |t| t.start);
        let end = match b.checked_sub(1).and_then(|k| self.t.get(k)) {
            Some(t) => t.end,
            None => start,
        };
        start..end.max(start)
    }

    /// The text of tokens `a..b`.
    pub fn slice(&self, a: usize, b: usize) -> &'a str {
        let r = self.range(a, b);
        self.text.get(r).unwrap_or("")
    }

    /// Whether an expression may start at token `i`: not glued to a letter or digit before
    /// it, nor to a `-`, `/` or `.` that follows a digit (`18/06/04` in `SP-18/06/04`, `2` in
    /// `1-2 years`), nor to a hyphen after a letter.
    pub fn start_ok(&self, i: usize) -> bool {
        if i == 0 {
            return true;
        }
        let prev = &self.t[i - 1];
        match prev.kind {
            Kind::Word | Kind::Num => false,
            Kind::Space => true,
            Kind::Other => {
                let before = i.checked_sub(2).and_then(|k| self.kind(k));
                match prev.text {
                    "-" | "/" | "." => {
                        !(before == Some(Kind::Num)
                            || (prev.text == "-" && before == Some(Kind::Word)))
                    }
                    _ => true,
                }
            }
        }
    }

    /// Whether an expression may end before token `j`: not glued to a letter or digit after it,
    /// nor to a `-`, `/` or `.` followed by a digit (`18/06/04` in `18/06/04-1016956`).
    pub fn end_ok(&self, j: usize) -> bool {
        let Some(next) = self.t.get(j) else {
            return true;
        };
        match next.kind {
            Kind::Word | Kind::Num => false,
            Kind::Space => true,
            Kind::Other => {
                !(matches!(next.text, "-" | "/" | ".") && self.kind(j + 1) == Some(Kind::Num))
            }
        }
    }

    /// The tokens of `text` without leading and trailing whitespace: `(first, end)`.
    pub fn trimmed(&self) -> (usize, usize) {
        let mut a = 0;
        let mut b = self.len();
        while a < b && self.t[a].kind == Kind::Space {
            a += 1;
        }
        while b > a && self.t[b - 1].kind == Kind::Space {
            b -= 1;
        }
        (a, b)
    }
}

/// Leftmost-longest, non-overlapping matches of `at` (which gives the end of the longest
/// expression starting at a token, if any), as byte ranges.
pub(crate) fn scan<T>(
    toks: &Toks<'_>,
    mut at: impl FnMut(&Toks<'_>, usize) -> Option<(usize, T)>,
) -> Vec<(Range<usize>, T)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks.kind(i) != Some(Kind::Space) {
            if let Some((end, v)) = at(toks, i) {
                if end > i {
                    out.push((toks.range(i, end), v));
                    i = end;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_byte_ranges() {
        let t = Toks::new("DATE: 05 MAR 2018\n3Q24 año");
        let kinds: Vec<Kind> = t.t.iter().map(|t| t.kind).collect();
        use Kind::*;
        assert_eq!(
            kinds,
            [
                Word, Other, Space, Num, Space, Word, Space, Num, Space, Num, Word, Num, Space,
                Word
            ]
        );
        assert_eq!(t.slice(3, 8), "05 MAR 2018");
        assert_eq!(t.word(5), Some("mar"));
        assert_eq!(t.word(13), Some("año"));
        assert!(t.start_ok(3));
        assert!(!t.start_ok(11), "24 is glued to Q");
    }

    #[test]
    fn glued_numbers_are_not_boundaries() {
        let t = Toks::new("SP-NULL-18/06/04-1016956");
        // `18` follows `NULL-`; `04` is followed by `-1016956`.
        let i = t.t.iter().position(|x| x.text == "18").unwrap_or(0);
        assert!(!t.start_ok(i));
        let j = t.t.iter().position(|x| x.text == "04").unwrap_or(0);
        assert!(!t.end_ok(j + 1));
    }
}
