//! A deterministic generator of synthetic earnings releases with their ground truth.
//!
//! English releases follow the 8-K "Exhibit 99.1" style; Spanish ones the CNMV "Otra
//! información relevante" style. Each carries the traps that break small models: the quarter just
//! closed stated (often in billions) before the guidance, net income with thousands separators,
//! guidance in billions, millions or "miles de millones", Spanish decimal commas, releases
//! without guidance, point guidance, withdrawn guidance, and varied phrasings of the period.
//!
//! The same seed always gives the same documents (a small SplitMix64 generator, no external
//! randomness), so a study can be rerun and compared.

use serde::{Deserialize, Serialize};

use contract_core::Amount;

use contract_core::read::{expressions, read_scale};
use contract_core::{Form, Period};

use super::{Expected, GroundedGuidance, ReleaseGuidance};

/// One synthetic release with what a correct extraction gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filing {
    /// Stable id (`en-007`, `es-012`).
    pub id: String,
    /// `en` or `es`.
    pub lang: String,
    /// The release text.
    pub text: String,
    /// The guidance in millions, or `None` when the release gives none (or withdraws it).
    pub truth: Option<Expected>,
    /// Which traps the document carries (for reading results by case).
    pub traps: Vec<String>,
    /// What a perfect copier fills in: the period, the amounts and the line as written.
    pub answer: ReleaseGuidance,
}

impl Filing {
    /// What a perfect copier fills in for [`GroundedGuidance`]: the guidance sentence, then the
    /// period and the amounts as written in it (the same copies as [`Filing::answer`]).
    pub fn grounded_answer(&self) -> GroundedGuidance {
        let quote = self
            .answer
            .line
            .and_then(|n| self.text.lines().nth((n as usize).checked_sub(1)?))
            .map(str::to_owned);
        let owned = quote.clone().unwrap_or_default();
        let q = owned.as_str();
        // The whole period the quote writes around the copied one (`the third quarter of
        // 2024` for `third quarter of 2024`).
        let period = self.answer.period.as_deref().map(|p| {
            Period::new(
                expressions(Form::Period, q)
                    .into_iter()
                    .find(|e| e.contains(p))
                    .unwrap_or_else(|| p.to_owned()),
            )
        });
        // Each end's currency and scale word as the quote writes them.
        let currency = expressions(Form::Currency, q).into_iter().next();
        let copy = |a: &Option<Amount>| {
            a.as_ref().map(|a| {
                let unit = a.unit.as_deref().and_then(|u| {
                    let want = read_scale(u).ok()?;
                    expressions(Form::Scale, q)
                        .into_iter()
                        .find(|e| read_scale(e).ok() == Some(want))
                });
                Amount::new(a.value, currency.as_deref(), unit.as_deref())
            })
        };
        GroundedGuidance {
            quote,
            period,
            low: copy(&self.answer.low),
            high: copy(&self.answer.high),
        }
    }
}

/// A number as written (`1,250`, `3.100`, `1,25`) read the way the contract asks the model to
/// copy it: thousands separators dropped, a decimal comma read as a point.
fn as_written(text: &str, lang: &str) -> f64 {
    let plain: String = if lang == "es" {
        text.replace('.', "").replace(',', ".")
    } else {
        text.replace(',', "")
    };
    plain.parse().unwrap_or(f64::NAN)
}

fn copied(
    period: &str,
    (l, h): (&str, &str),
    lang: &str,
    currency: &str,
    word: &str,
    line: usize,
) -> ReleaseGuidance {
    let amount = |v: &str| Amount::new(as_written(v, lang), Some(currency), Some(word));
    let period = period
        .strip_prefix("the ")
        .or_else(|| period.strip_prefix("el "))
        .unwrap_or(period);
    ReleaseGuidance {
        period: Some(period.to_owned()),
        low: Some(amount(l)),
        high: Some(amount(h)),
        line: Some(line as u32),
    }
}

const NOTHING: ReleaseGuidance = ReleaseGuidance {
    period: None,
    low: None,
    high: None,
    line: None,
};

/// SplitMix64: tiny, deterministic, good enough to pick phrasings.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// A uniform integer in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// One element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// What kind of guidance a release states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Range,
    Point,
    None,
    Withdrawn,
}

/// The scale the guidance is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GScale {
    Millions,
    Billions,
}

const EN_COMPANIES: [&str; 12] = [
    "Acme Corporation",
    "Globex Inc.",
    "Initech Holdings",
    "Vandelay Industries",
    "Hooli Inc.",
    "Stark Manufacturing Co.",
    "Wayne Logistics Inc.",
    "Cyberdyne Systems Corp.",
    "Soylent Foods Inc.",
    "Tyrell Biotech Inc.",
    "Massive Dynamic Corp.",
    "Oscorp Technologies",
];
const ES_COMPANIES: [&str; 10] = [
    "Iberia Redes, S.A.",
    "Construcciones Duero, S.A.",
    "Energías del Tajo, S.A.",
    "Grupo Alhambra, S.A.",
    "Telecomunicaciones Cierzo, S.A.",
    "Banco Mediterráneo, S.A.",
    "Logística Guadiana, S.A.",
    "Farmacéutica Ebro, S.A.",
    "Hoteles Tramontana, S.A.",
    "Aceros del Nervión, S.A.",
];
const EN_CITIES: [&str; 6] = [
    "SAN JOSE, Calif.",
    "NEW YORK",
    "AUSTIN, Texas",
    "CHICAGO",
    "BOSTON",
    "SEATTLE",
];
const EN_ORD: [&str; 4] = ["first", "second", "third", "fourth"];
const EN_ORD_CAP: [&str; 4] = ["First", "Second", "Third", "Fourth"];
const ES_ORD: [&str; 4] = ["primer", "segundo", "tercer", "cuarto"];
const EN_MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const ES_MONTHS: [&str; 12] = [
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
];
const QUARTER_END_DAY: [u32; 4] = [31, 30, 30, 31];

/// `n` releases from `seed`, alternating languages about 60% English / 40% Spanish.
pub fn generate(n: usize, seed: u64) -> Vec<Filing> {
    let mut rng = Rng::new(seed);
    let (mut en, mut es) = (0usize, 0usize);
    (0..n)
        .map(|i| {
            // A fixed pattern keeps the mix stable for any n: 3 English then 2 Spanish.
            let spanish = i % 5 >= 3;
            let kind = match rng.below(10) {
                0..=4 => Kind::Range,
                5..=6 => Kind::Point,
                7..=8 => Kind::None,
                _ => Kind::Withdrawn,
            };
            if spanish {
                es += 1;
                spanish_release(&mut rng, format!("es-{es:03}"), kind)
            } else {
                en += 1;
                english_release(&mut rng, format!("en-{en:03}"), kind)
            }
        })
        .collect()
}

/// The quarter just closed and the next one.
fn quarters(rng: &mut Rng) -> ((u8, u16), (u8, u16)) {
    let q = rng.range(1, 4) as u8;
    let y = rng.range(2021, 2027) as u16;
    let next = if q == 4 { (1, y + 1) } else { (q + 1, y) };
    ((q, y), next)
}

/// A guidance range in millions: (low, high), rounded to how releases write them.
fn guidance_millions(rng: &mut Rng, scale: GScale, reported_m: f64, point: bool) -> (f64, f64) {
    // Around the quarter just closed, -5%..+12%.
    let center = reported_m * (0.95 + rng.below(18) as f64 / 100.0);
    let (low, high) = match scale {
        // Billions with two decimals: 1.25 billion = 1250 million.
        GScale::Billions => {
            let low = (center / 10.0).round() * 10.0;
            let width = rng.range(1, 5) as f64 * 10.0;
            (low, low + width)
        }
        // Millions in multiples of 5 (or 1 for small companies).
        GScale::Millions => {
            let step = if center < 200.0 { 1.0 } else { 5.0 };
            let low = (center / step).round() * step;
            let width = rng.range(2, 12) as f64 * step;
            (low, low + width)
        }
    };
    if point {
        (high, high)
    } else {
        (low, high)
    }
}

/// The guidance's scale (billions only for companies reporting a billion or more) and its ends
/// in millions.
fn pick_guidance(rng: &mut Rng, reported_m: f64, point: bool) -> (GScale, f64, f64) {
    let scale = if reported_m >= 1000.0 && rng.chance(0.6) {
        GScale::Billions
    } else {
        GScale::Millions
    };
    let (low, high) = guidance_millions(rng, scale, reported_m, point);
    (scale, low, high)
}

/// `1234567` → `1,234,567` (English) or `1.234.567` (Spanish).
fn group(n: u64, sep: char) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// A number of millions as written in `scale`: `1250` in billions is `1.25`; with English
/// thousands separators in millions (`1,250`).
fn en_number(millions: f64, scale: GScale) -> String {
    match scale {
        GScale::Billions => trim_decimals(millions / 1000.0, 3),
        GScale::Millions => {
            if millions.fract() == 0.0 {
                group(millions as u64, ',')
            } else {
                trim_decimals(millions, 1)
            }
        }
    }
}

/// The Spanish spelling: decimal comma, dot thousands separator.
fn es_number(millions: f64, scale: GScale) -> String {
    match scale {
        GScale::Billions => trim_decimals(millions / 1000.0, 3).replace('.', ","),
        GScale::Millions => {
            if millions.fract() == 0.0 {
                group(millions as u64, '.')
            } else {
                trim_decimals(millions, 1).replace('.', ",")
            }
        }
    }
}

fn trim_decimals(x: f64, places: usize) -> String {
    let s = format!("{x:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

fn english_release(rng: &mut Rng, id: String, kind: Kind) -> Filing {
    let company = *rng.pick(&EN_COMPANIES);
    let city = *rng.pick(&EN_CITIES);
    let ((q0, y0), (q1, y1)) = quarters(rng);
    let (currency, sym_before) = if rng.chance(0.8) {
        ("USD", "$")
    } else {
        ("EUR", "€")
    };
    let mut traps = Vec::new();

    // The quarter just closed: often in billions, before the guidance.
    let reported_m = rng.range(180, 4800) as f64;
    let reported_in_billions = reported_m >= 1000.0 && rng.chance(0.8);
    let reported = if reported_in_billions {
        traps.push("reported_in_billions".to_owned());
        format!(
            "{sym_before}{} billion",
            trim_decimals((reported_m / 10.0).round() / 100.0, 2)
        )
    } else {
        format!("{sym_before}{} million", group(reported_m as u64, ','))
    };
    let net_thousands = (reported_m * (50.0 + rng.below(120) as f64)) as u64;
    let net = if rng.chance(0.5) {
        traps.push("net_income_thousands".to_owned());
        format!("{sym_before}{} thousand", group(net_thousands, ','))
    } else {
        format!("{sym_before}{}", group(net_thousands * 1000, ','))
    };

    let month_end = EN_MONTHS[(q0 as usize) * 3 - 1];
    let release_month = EN_MONTHS[((q0 as usize) * 3) % 12];
    let release_year = if q0 == 4 { y0 + 1 } else { y0 };
    let period = match rng.below(5) {
        4 => {
            traps.push("period_relative".to_owned());
            "the upcoming quarter".to_owned()
        }
        0 => format!("the {} quarter of {y1}", EN_ORD[q1 as usize - 1]),
        1 => format!("Q{q1} {y1}"),
        2 => {
            traps.push("period_as_fiscal".to_owned());
            format!("fiscal {} quarter {y1}", EN_ORD[q1 as usize - 1])
        }
        _ => {
            traps.push("period_as_date".to_owned());
            format!(
                "the quarter ending {} {}, {y1}",
                EN_MONTHS[q1 as usize * 3 - 1],
                QUARTER_END_DAY[q1 as usize - 1]
            )
        }
    };

    let mut lines = vec![
        "Exhibit 99.1".to_owned(),
        format!(
            "{company} Reports {} Quarter {y0} Results",
            EN_ORD_CAP[q0 as usize - 1]
        ),
        format!(
            "{city}, {release_month} {}, {release_year} -- {company} today announced financial results for its {} quarter ended {month_end} {}, {y0}.",
            rng.range(18, 29),
            EN_ORD[q0 as usize - 1],
            QUARTER_END_DAY[q0 as usize - 1]
        ),
        format!(
            "Revenue for the {} quarter was {reported}, up {}% year over year.",
            EN_ORD[q0 as usize - 1],
            rng.range(2, 19)
        ),
        format!(
            "Net income was {net}, or {sym_before}{}.{:02} per diluted share.",
            rng.range(0, 3),
            rng.range(1, 99)
        ),
    ];

    let mut answer = NOTHING;
    let truth = match kind {
        Kind::Range | Kind::Point => {
            let point = kind == Kind::Point;
            let (scale, low, high) = pick_guidance(rng, reported_m, point);
            let word = match scale {
                GScale::Billions => {
                    traps.push("guidance_in_billions".to_owned());
                    "billion"
                }
                GScale::Millions => "million",
            };
            let (l, h) = (en_number(low, scale), en_number(high, scale));
            if point {
                traps.push("point_guidance".to_owned());
            }
            lines.push("Outlook".to_owned());
            let sentence = if point {
                match rng.below(2) {
                    0 => format!(
                        "For {period}, {company} expects revenue of approximately {sym_before}{h} {word}."
                    ),
                    _ => format!(
                        "The company projects revenue of about {sym_before}{h} {word} for {period}."
                    ),
                }
            } else {
                match rng.below(3) {
                    0 => format!(
                        "For {period}, {company} expects revenue between {sym_before}{l} {word} and {sym_before}{h} {word}."
                    ),
                    1 => format!(
                        "Revenue for {period} is expected to be in the range of {sym_before}{l} to {sym_before}{h} {word}."
                    ),
                    _ => format!(
                        "The company currently anticipates {period} revenue of {sym_before}{l} {word} to {sym_before}{h} {word}."
                    ),
                }
            };
            lines.push(sentence);
            answer = copied(&period, (&l, &h), "en", currency, word, lines.len());
            Some(Expected {
                quarter: q1,
                year: y1,
                low,
                high,
                currency: currency.to_owned(),
            })
        }
        Kind::None => {
            traps.push("no_guidance".to_owned());
            if rng.chance(0.5) {
                lines.push("The company does not provide quarterly revenue guidance.".to_owned());
            }
            None
        }
        Kind::Withdrawn => {
            traps.push("withdrawn_guidance".to_owned());
            lines.push("Outlook".to_owned());
            lines.push(format!(
                "Given current market uncertainty, {company} is withdrawing the revenue outlook for {period} it issued in {}.",
                EN_MONTHS[rng.below(12) as usize]
            ));
            None
        }
    };
    lines.push(format!(
        "Cash and equivalents were {sym_before}{} million at quarter end.",
        group(rng.range(90, 2500), ',')
    ));
    Filing {
        id,
        lang: "en".into(),
        text: lines.join("\n"),
        truth,
        traps,
        answer,
    }
}

fn spanish_release(rng: &mut Rng, id: String, kind: Kind) -> Filing {
    let company = *rng.pick(&ES_COMPANIES);
    let ((q0, y0), (q1, y1)) = quarters(rng);
    let (currency, cur_words) = if rng.chance(0.85) {
        ("EUR", "euros")
    } else {
        ("USD", "dólares")
    };
    let mut traps = Vec::new();

    let reported_m = rng.range(150, 4800) as f64;
    let reported = if reported_m >= 1000.0 && rng.chance(0.8) {
        traps.push("reported_in_billions".to_owned());
        format!(
            "{} miles de millones de {cur_words}",
            trim_decimals((reported_m / 10.0).round() / 100.0, 2).replace('.', ",")
        )
    } else {
        format!("{} millones de {cur_words}", group(reported_m as u64, '.'))
    };
    let net_thousands = (reported_m * (50.0 + rng.below(120) as f64)) as u64;
    traps.push("net_income_thousands".to_owned());
    let net = format!("{} miles de {cur_words}", group(net_thousands, '.'));

    let period = match rng.below(4) {
        3 => {
            traps.push("period_relative".to_owned());
            "el próximo trimestre".to_owned()
        }
        0 => format!("el {} trimestre de {y1}", ES_ORD[q1 as usize - 1]),
        1 => format!("el {}T {y1}", q1),
        _ => {
            traps.push("period_as_date".to_owned());
            format!(
                "el trimestre que termina el {} de {} de {y1}",
                QUARTER_END_DAY[q1 as usize - 1],
                ES_MONTHS[q1 as usize * 3 - 1]
            )
        }
    };

    let mut lines = vec![
        "COMISIÓN NACIONAL DEL MERCADO DE VALORES".to_owned(),
        "OTRA INFORMACIÓN RELEVANTE".to_owned(),
        format!(
            "{company} comunica los resultados correspondientes al {} trimestre de {y0}.",
            ES_ORD[q0 as usize - 1]
        ),
        format!(
            "Los ingresos del trimestre alcanzaron {reported}, un {} % más que en el mismo periodo del año anterior.",
            rng.range(2, 19)
        ),
        format!("El beneficio neto fue de {net}."),
    ];

    let mut answer = NOTHING;
    let truth = match kind {
        Kind::Range | Kind::Point => {
            let point = kind == Kind::Point;
            let (scale, low, high) = pick_guidance(rng, reported_m, point);
            let word = match scale {
                GScale::Billions => {
                    traps.push("guidance_in_billions".to_owned());
                    if rng.chance(0.5) {
                        "miles de millones"
                    } else {
                        "mil millones"
                    }
                }
                GScale::Millions => "millones",
            };
            let (l, h) = (es_number(low, scale), es_number(high, scale));
            if point {
                traps.push("point_guidance".to_owned());
            }
            lines.push("Perspectivas".to_owned());
            let sentence = if point {
                format!(
                    "Para {period}, la compañía prevé unos ingresos de aproximadamente {h} {word} de {cur_words}."
                )
            } else {
                match rng.below(2) {
                    0 => format!(
                        "Para {period}, la compañía prevé unos ingresos de entre {l} y {h} {word} de {cur_words}."
                    ),
                    _ => format!(
                        "La sociedad estima que los ingresos de {period} se situarán entre {l} {word} y {h} {word} de {cur_words}."
                    ),
                }
            };
            lines.push(sentence);
            answer = copied(&period, (&l, &h), "es", currency, word, lines.len());
            Some(Expected {
                quarter: q1,
                year: y1,
                low,
                high,
                currency: currency.to_owned(),
            })
        }
        Kind::None => {
            traps.push("no_guidance".to_owned());
            if rng.chance(0.5) {
                lines.push(
                    "La sociedad no facilita previsiones de ingresos trimestrales.".to_owned(),
                );
            }
            None
        }
        Kind::Withdrawn => {
            traps.push("withdrawn_guidance".to_owned());
            lines.push("Perspectivas".to_owned());
            lines.push(format!(
                "Ante la incertidumbre del mercado, la sociedad retira las previsiones de ingresos para {period} publicadas anteriormente."
            ));
            None
        }
    };
    lines.push(format!(
        "La deuda financiera neta se situó en {} millones de {cur_words}.",
        group(rng.range(90, 9000), '.')
    ));
    Filing {
        id,
        lang: "es".into(),
        text: lines.join("\n"),
        truth,
        traps,
        answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_documents() {
        assert_eq!(generate(40, 7), generate(40, 7));
        assert_ne!(generate(40, 7), generate(40, 8));
    }

    #[test]
    fn numbers_are_spelled_as_releases_write_them() {
        assert_eq!(group(1234567, ','), "1,234,567");
        assert_eq!(group(999, '.'), "999");
        assert_eq!(en_number(1250.0, GScale::Billions), "1.25");
        assert_eq!(en_number(1250.0, GScale::Millions), "1,250");
        assert_eq!(es_number(1250.0, GScale::Billions), "1,25");
        assert_eq!(es_number(3100.0, GScale::Millions), "3.100");
        assert_eq!(es_number(3000.0, GScale::Billions), "3");
    }

    #[test]
    fn forty_documents_cover_every_trap_and_both_languages() {
        let docs = generate(40, super::super::DEFAULT_SEED);
        let ids: std::collections::HashSet<_> = docs.iter().map(|d| d.id.clone()).collect();
        assert_eq!(ids.len(), 40);
        assert_eq!(docs.iter().filter(|d| d.lang == "es").count(), 16);
        for trap in [
            "reported_in_billions",
            "net_income_thousands",
            "guidance_in_billions",
            "point_guidance",
            "no_guidance",
            "withdrawn_guidance",
            "period_as_date",
        ] {
            assert!(
                docs.iter().any(|d| d.traps.iter().any(|t| t == trap)),
                "no document with {trap}"
            );
        }
        for d in &docs {
            if let Some(t) = &d.truth {
                assert!(t.low <= t.high && t.low > 0.0, "{}: {t:?}", d.id);
                assert!((1..=4).contains(&t.quarter));
            }
        }
    }
}
