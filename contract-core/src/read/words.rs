//! Word tables: month and weekday names (English, Spanish, French, German, Portuguese,
//! Italian) and number words (English and Spanish).

use chrono::Weekday;

use super::token::{Kind, Toks};

/// Month names and abbreviations, lowercase. No word names two different months in these
/// languages (`mar` is March in all of them, `set` September in Spanish and Portuguese).
const MONTHS: &[(&str, u32)] = &[
    // English
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sept", 9),
    ("sep", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
    // Spanish
    ("enero", 1),
    ("ene", 1),
    ("febrero", 2),
    ("marzo", 3),
    ("abril", 4),
    ("abr", 4),
    ("mayo", 5),
    ("junio", 6),
    ("julio", 7),
    ("agosto", 8),
    ("ago", 8),
    ("septiembre", 9),
    ("setiembre", 9),
    ("set", 9),
    ("octubre", 10),
    ("noviembre", 11),
    ("diciembre", 12),
    ("dic", 12),
    // French
    ("janvier", 1),
    ("janv", 1),
    ("février", 2),
    ("fevrier", 2),
    ("févr", 2),
    ("fevr", 2),
    ("mars", 3),
    ("avril", 4),
    ("avr", 4),
    ("mai", 5),
    ("juin", 6),
    ("juillet", 7),
    ("juil", 7),
    ("août", 8),
    ("aout", 8),
    ("septembre", 9),
    ("octobre", 10),
    ("novembre", 11),
    ("décembre", 12),
    ("decembre", 12),
    ("déc", 12),
    // German
    ("januar", 1),
    ("jänner", 1),
    ("jän", 1),
    ("februar", 2),
    ("märz", 3),
    ("maerz", 3),
    ("mär", 3),
    ("juni", 6),
    ("juli", 7),
    ("oktober", 10),
    ("okt", 10),
    ("dezember", 12),
    ("dez", 12),
    // Portuguese
    ("janeiro", 1),
    ("fevereiro", 2),
    ("fev", 2),
    ("março", 3),
    ("marco", 3),
    ("maio", 5),
    ("junho", 6),
    ("julho", 7),
    ("setembro", 9),
    ("outubro", 10),
    ("out", 10),
    ("novembro", 11),
    ("dezembro", 12),
    // Italian
    ("gennaio", 1),
    ("gen", 1),
    ("febbraio", 2),
    ("aprile", 4),
    ("maggio", 5),
    ("mag", 5),
    ("giugno", 6),
    ("giu", 6),
    ("luglio", 7),
    ("lug", 7),
    ("settembre", 9),
    ("ottobre", 10),
    ("ott", 10),
    ("dicembre", 12),
];

/// The month a lowercase word names.
pub(crate) fn month_word(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(n, _)| *n == w).map(|&(_, m)| m)
}

/// A month name at `i`, with an optional dot after an abbreviation (`Sept.`): `(end, month)`.
pub(crate) fn month_at(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let m = month_word(t.word(i)?)?;
    let j = if t.is_other(i + 1, '.') { i + 2 } else { i + 1 };
    Some((j, m))
}

const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("mon", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("tue", Weekday::Tue),
    ("tues", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("wed", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("thu", Weekday::Thu),
    ("thur", Weekday::Thu),
    ("thurs", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("fri", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sat", Weekday::Sat),
    ("sunday", Weekday::Sun),
    ("sun", Weekday::Sun),
    ("lunes", Weekday::Mon),
    ("martes", Weekday::Tue),
    ("miércoles", Weekday::Wed),
    ("miercoles", Weekday::Wed),
    ("jueves", Weekday::Thu),
    ("viernes", Weekday::Fri),
    ("sábado", Weekday::Sat),
    ("sabado", Weekday::Sat),
    ("domingo", Weekday::Sun),
    ("lundi", Weekday::Mon),
    ("mardi", Weekday::Tue),
    ("mercredi", Weekday::Wed),
    ("jeudi", Weekday::Thu),
    ("vendredi", Weekday::Fri),
    ("samedi", Weekday::Sat),
    ("dimanche", Weekday::Sun),
    ("montag", Weekday::Mon),
    ("dienstag", Weekday::Tue),
    ("mittwoch", Weekday::Wed),
    ("donnerstag", Weekday::Thu),
    ("freitag", Weekday::Fri),
    ("samstag", Weekday::Sat),
    ("sonntag", Weekday::Sun),
];

/// A weekday name at `i`, with an optional dot: `(end, weekday)`.
pub(crate) fn weekday_at(t: &Toks<'_>, i: usize) -> Option<(usize, Weekday)> {
    let w = t.word(i)?;
    let d = WEEKDAYS.iter().find(|(n, _)| *n == w).map(|&(_, d)| d)?;
    let j = if t.is_other(i + 1, '.') { i + 2 } else { i + 1 };
    Some((j, d))
}

/// Ordinal suffixes written after a day or a count (`1st`, `2nd`, `1er`, `1º`).
const ORDINAL_SUFFIXES: &[&str] = &["st", "nd", "rd", "th", "er", "º", "ª"];

/// A one- or two-digit number at `i` with an optional ordinal suffix glued to it (`18th`,
/// `1º`, `1°`): `(end, value)`.
pub(crate) fn day_at(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let (v, _) = t.num_upto(i, 2)?;
    let mut j = i + 1;
    if t.word_in(j, ORDINAL_SUFFIXES).is_some() || t.is_other(j, '°') {
        j += 1;
    }
    Some((j, v))
}

const EN_UNITS: &[(&str, u32)] = &[
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
];

const EN_TENS: &[(&str, u32)] = &[
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fourty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
];

const ES_WORDS: &[(&str, u32)] = &[
    ("cero", 0),
    ("un", 1),
    ("uno", 1),
    ("una", 1),
    ("dos", 2),
    ("tres", 3),
    ("cuatro", 4),
    ("cinco", 5),
    ("seis", 6),
    ("siete", 7),
    ("ocho", 8),
    ("nueve", 9),
    ("diez", 10),
    ("once", 11),
    ("doce", 12),
    ("trece", 13),
    ("catorce", 14),
    ("quince", 15),
    ("dieciséis", 16),
    ("dieciseis", 16),
    ("diecisiete", 17),
    ("dieciocho", 18),
    ("diecinueve", 19),
    ("veinte", 20),
    ("veintiuno", 21),
    ("veintiún", 21),
    ("veintiun", 21),
    ("veintiuna", 21),
    ("veintidós", 22),
    ("veintidos", 22),
    ("veintitrés", 23),
    ("veintitres", 23),
    ("veinticuatro", 24),
    ("veinticinco", 25),
    ("veintiséis", 26),
    ("veintiseis", 26),
    ("veintisiete", 27),
    ("veintiocho", 28),
    ("veintinueve", 29),
    ("cien", 100),
];

const ES_TENS: &[(&str, u32)] = &[
    ("treinta", 30),
    ("cuarenta", 40),
    ("cincuenta", 50),
    ("sesenta", 60),
    ("setenta", 70),
    ("ochenta", 80),
    ("noventa", 90),
];

fn lookup(table: &[(&str, u32)], w: &str) -> Option<u32> {
    table.iter().find(|(n, _)| *n == w).map(|&(_, v)| v)
}

/// After a hyphen joining two number words (`twenty-four`, `twenty-\nfour`): the next index.
fn hyphen(t: &Toks<'_>, i: usize) -> Option<usize> {
    t.is_other(i, '-').then(|| t.sp(i + 1))
}

/// English tens and units: `seven`, `twenty`, `twenty-four`, `twenty four`.
fn en_below_hundred(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let w = t.word(i)?;
    if let Some(v) = lookup(EN_UNITS, w) {
        return Some((i + 1, v));
    }
    let tens = lookup(EN_TENS, w)?;
    let unit = |j: usize| {
        t.word(j)
            .and_then(|u| lookup(EN_UNITS, u))
            .filter(|u| (1..=9).contains(u))
    };
    if let Some(j) = hyphen(t, i + 1) {
        if let Some(u) = unit(j) {
            return Some((j + 1, tens + u));
        }
    }
    if let Some(j) = t.sp_req(i + 1) {
        if let Some(u) = unit(j) {
            return Some((j + 1, tens + u));
        }
    }
    Some((i + 1, tens))
}

/// English number words up to 999: `one`, `twenty-four`, `hundred`, `one hundred and twenty`.
fn en_number(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let (mut j, mut v) = match en_below_hundred(t, i) {
        Some(x) => x,
        None if t.is_word(i, "hundred") => return Some((i + 1, 100)),
        None => return None,
    };
    // `one hundred`, `two hundred and five`
    if (1..=9).contains(&v) {
        if let Some(k) = t.sp_req(j) {
            if t.is_word(k, "hundred") {
                v *= 100;
                j = k + 1;
                let mut rest = t.sp_req(j);
                if let Some(r) = rest {
                    if t.is_word(r, "and") {
                        rest = t.sp_req(r + 1);
                    }
                }
                if let Some((e, u)) = rest.and_then(|r| en_below_hundred(t, r)) {
                    if u > 0 {
                        v += u;
                        j = e;
                    }
                }
            }
        }
    }
    Some((j, v))
}

/// Spanish number words up to 199: `uno`, `veinticuatro`, `treinta y seis`, `cien`, `ciento
/// veinte`.
fn es_number(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let w = t.word(i)?;
    if w == "ciento" {
        let j = t.sp_req(i + 1)?;
        let (e, v) = es_below_hundred(t, j)?;
        return Some((e, 100 + v));
    }
    es_below_hundred(t, i)
}

fn es_below_hundred(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    let w = t.word(i)?;
    if let Some(v) = lookup(ES_WORDS, w) {
        return Some((i + 1, v));
    }
    let tens = lookup(ES_TENS, w)?;
    // `treinta y seis`
    let more = t.sp_req(i + 1).and_then(|j| {
        let k = t.sp_req(t.word_in(j, &["y"])?)?;
        let u = lookup(ES_WORDS, t.word(k)?).filter(|u| (1..=9).contains(u))?;
        Some((k + 1, tens + u))
    });
    Some(more.unwrap_or((i + 1, tens)))
}

/// A number written in words at `i`, English or Spanish: `(end, value)`.
pub(crate) fn number_words_at(t: &Toks<'_>, i: usize) -> Option<(usize, u32)> {
    en_number(t, i).or_else(|| es_number(t, i))
}

/// Whether `w` can start a number written in words.
pub(crate) fn is_number_word(w: &str) -> bool {
    lookup(EN_UNITS, w).is_some()
        || lookup(EN_TENS, w).is_some()
        || lookup(ES_WORDS, w).is_some()
        || lookup(ES_TENS, w).is_some()
        || matches!(w, "hundred" | "ciento")
}

/// Ordinals one to four in English and Spanish (`third`, `3rd`, `tercer`): `(end, n)`.
pub(crate) fn ordinal_at(t: &Toks<'_>, i: usize) -> Option<(usize, u8)> {
    if let Some(w) = t.word(i) {
        let n = match w {
            "first" | "primer" | "primero" | "primera" => 1,
            "second" | "segundo" | "segunda" => 2,
            "third" | "tercer" | "tercero" | "tercera" => 3,
            "fourth" | "cuarto" | "cuarta" => 4,
            _ => return None,
        };
        return Some((i + 1, n));
    }
    let (v, digits) = t.num_upto(i, 1)?;
    if digits != 1 || !(1..=4).contains(&v) {
        return None;
    }
    let suffix = t.word(i + 1)?;
    let ok = matches!(
        (v, suffix),
        (1, "st" | "er" | "ro")
            | (2, "nd" | "do")
            | (3, "rd" | "er" | "ro")
            | (4, "th" | "to")
            | (_, "º" | "ª")
    );
    // `1.º`, `1.er` are not read: a dot there is a numbered list more often than an ordinal.
    (ok && t.kind(i + 1) == Some(Kind::Word)).then_some((i + 2, v as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Option<u32> {
        let t = Toks::new(s);
        number_words_at(&t, 0)
            .filter(|(e, _)| *e == t.len())
            .map(|(_, v)| v)
    }

    #[test]
    fn number_words_in_both_languages() {
        for (s, v) in [
            ("one", 1),
            ("twelve", 12),
            ("twenty", 20),
            ("twenty-four", 24),
            ("twenty four", 24),
            ("twenty-\nfour", 24),
            ("Ninety-Nine", 99),
            ("hundred", 100),
            ("one hundred", 100),
            ("two hundred and five", 205),
            ("un", 1),
            ("una", 1),
            ("quince", 15),
            ("dieciocho", 18),
            ("veinticuatro", 24),
            ("treinta y seis", 36),
            ("noventa y nueve", 99),
            ("cien", 100),
            ("ciento veinte", 120),
        ] {
            assert_eq!(words(s), Some(v), "{s}");
        }
        assert_eq!(
            words("twenty-"),
            None,
            "a dangling hyphen is not part of the number"
        );
        assert_eq!(words("lots"), None);
    }

    #[test]
    fn month_and_weekday_names() {
        let t = Toks::new("Sept. März août dic");
        assert_eq!(month_at(&t, 0), Some((2, 9)));
        assert_eq!(month_at(&t, 3).map(|x| x.1), Some(3));
        assert_eq!(month_at(&t, 5).map(|x| x.1), Some(8));
        assert_eq!(month_at(&t, 7).map(|x| x.1), Some(12));
        let t = Toks::new("Miércoles");
        assert_eq!(weekday_at(&t, 0), Some((1, Weekday::Wed)));
    }
}
