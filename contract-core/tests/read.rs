//! `contract_core::read`: the finders and readers on made-up documents, and their properties
//! on arbitrary text (no panic; a finder's ranges are well-formed and each reads; an
//! expression written by the tests reads back to what was written, and is found whole).

use std::ops::Range;

use chrono::NaiveDate;
use contract_core::ground::Numerals;
use contract_core::read::*;
use proptest::prelude::*;

fn slices(text: &str, ranges: &[Range<usize>]) -> Vec<String> {
    ranges
        .iter()
        .map(|r| text.get(r.clone()).unwrap_or("<bad range>").to_owned())
        .collect()
}

/// Sorted, non-empty, not overlapping, on character boundaries, inside the text.
fn well_formed(text: &str, ranges: &[Range<usize>]) -> Result<(), String> {
    let mut last = 0;
    for r in ranges {
        if r.start < last || r.start >= r.end || r.end > text.len() {
            return Err(format!("{r:?} after {last} in {} bytes", text.len()));
        }
        if text.get(r.clone()).is_none() {
            return Err(format!("{r:?} is not on character boundaries"));
        }
        last = r.end;
    }
    Ok(())
}

#[test]
fn a_day_first_receipt() {
    let receipt = "KEDAI RUNCIT MAJU SDN BHD\nTEL: 03-12345678\nINVOICE 01-03-18 5:23 PM\n\
                   PAID 19/10/2018 20:49\nTOTAL (RM) 60.30\nCASH $70.30";
    let c = Conventions::detect(receipt);
    assert_eq!(c.date_order(), DateOrder::DayFirst);
    assert_eq!(c.currencies(), ["MYR"]);
    assert_eq!(c.numerals(), Numerals::Point);
    assert_eq!(
        slices(receipt, &find_dates(receipt)),
        ["01-03-18", "19/10/2018"]
    );
    let read: Vec<String> = find_dates(receipt)
        .into_iter()
        .filter_map(|r| read_date(receipt.get(r)?, &c).ok())
        .map(|d| d.iso())
        .collect();
    assert_eq!(read, ["2018-03-01", "2018-10-19"]);
    assert_eq!(c.reference_date(), NaiveDate::from_ymd_opt(2018, 3, 1));
    assert_eq!(slices(receipt, &find_currencies(receipt)), ["RM", "$"]);
    assert_eq!(read_currency("$", &c), Ok("MYR"));
}

#[test]
fn a_us_agreement() {
    let nda =
        "MUTUAL NONDISCLOSURE AGREEMENT\nThis Agreement is made as of the 18th day of April, \
               2001 (the \"Effective Date\").\nThe obligations survive for a period of three (3) \
               years; notices within thirty (30) days.\nAcknowledged 04/18/2001; amended 5/6/02.";
    let c = Conventions::detect(nda);
    assert_eq!(c.date_order(), DateOrder::MonthFirst);
    assert_eq!(c.reference_date(), NaiveDate::from_ymd_opt(2001, 4, 18));
    assert_eq!(
        slices(nda, &find_dates(nda)),
        ["the 18th day of April, 2001", "04/18/2001", "5/6/02"]
    );
    assert_eq!(
        read_date("5/6/02", &c).map(|d| d.iso()),
        Ok("2002-05-06".into())
    );
    let terms: Vec<String> = find_durations(nda)
        .into_iter()
        .filter_map(|r| read_duration(nda.get(r)?).ok())
        .map(|d| d.to_string())
        .collect();
    assert_eq!(terms, ["3 years", "30 days"]);
    assert_eq!(
        slices(nda, &find_durations(nda)),
        ["a period of three (3) years", "thirty (30) days"]
    );
}

#[test]
fn a_spanish_release() {
    let release = "Acme comunica los resultados del segundo trimestre de 2025. Los ingresos \
                   fueron de 1.730,5 millones de euros. Para el próximo trimestre prevé entre \
                   2,26 y 2,28 miles de millones de euros; en el ejercicio 2025, 9.000 millones.";
    let c = Conventions::detect(release);
    assert_eq!(c.numerals(), Numerals::Comma);
    assert_eq!(c.currencies(), ["EUR"]);
    let periods = slices(release, &find_periods(release));
    assert_eq!(
        periods,
        [
            "segundo trimestre de 2025",
            "el próximo trimestre",
            "el ejercicio 2025"
        ]
    );
    let reported = read_period(&periods[0], &c);
    assert_eq!(
        reported.as_ref().map(|p| p.to_string()),
        Ok("Q2 2025".into())
    );
    let c = c.with_reference_period(reported.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        read_period("el próximo trimestre", &c).map(|p| p.to_string()),
        Ok("Q3 2025".into())
    );
    assert_eq!(
        slices(release, &find_scales(release)),
        ["millones", "miles de millones", "millones"]
    );
    assert_eq!(
        read_scale("miles de millones"),
        Ok(contract_core::Scale::Billions)
    );
}

#[test]
fn an_english_release_with_a_fiscal_calendar() {
    let release = "Acme Reports Fiscal 2024 Third Quarter Results. For Q4 FY2024, Acme expects \
                   revenue of $1.2 billion to $1.3 billion; for fiscal 2025, $5.1 billion.";
    let c = Conventions::detect(release);
    let periods = slices(release, &find_periods(release));
    assert_eq!(
        periods,
        ["Fiscal 2024", "Third Quarter", "Q4 FY2024", "fiscal 2025"]
    );
    assert_eq!(
        read_period("Q4 FY2024", &c).map(|p| p.to_string()),
        Ok("Q4 FY2024".into())
    );
    let reference = PeriodRead::new(PeriodKind::Quarter(3), 2024, true);
    let c = c.with_reference_period(reference.unwrap_or_else(|| unreachable!()));
    assert_eq!(
        read_period("Third Quarter", &c).map(|p| p.to_string()),
        Ok("Q3 FY2024".into())
    );
    assert_eq!(
        read_period("the coming fiscal year", &c).map(|p| p.to_string()),
        Ok("FY2025".into())
    );
    assert_eq!(
        slices(release, &find_scales(release)),
        ["billion", "billion", "billion"]
    );
    assert_eq!(read_currency("$", &c), Ok("USD"));
}

/// A finder.
type Finder = fn(&str) -> Vec<Range<usize>>;

#[test]
fn finders_offer_whole_expressions_only() {
    let cases: [(&str, Finder, &[&str]); 8] = [
        ("DATE: 05 MAR 2018 10:21", find_dates, &["05 MAR 2018"]),
        ("made on April 18, 2001.", find_dates, &["April 18, 2001"]),
        ("in 2018 and 20 18", find_dates, &[]),
        ("for three (3) years.", find_durations, &["three (3) years"]),
        ("20 days in 2018", find_durations, &["20 days"]),
        ("paid US$ 1,200", find_currencies, &["US$"]),
        (
            "2,26 miles de millones",
            find_scales,
            &["miles de millones"],
        ),
        (
            "for the third quarter of fiscal 2024,",
            find_periods,
            &["the third quarter of fiscal 2024"],
        ),
    ];
    for (text, find, want) in cases {
        assert_eq!(slices(text, &find(text)), want, "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// Text made of the pieces documents are made of, and arbitrary characters.
fn documentish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{1,8}",
        "[/.,:;()'’\\-]",
        "[ \n\t]{1,2}",
        Just("Q".to_owned()),
        Just("FY".to_owned()),
        Just("de".to_owned()),
        Just("of".to_owned()),
        Just("the".to_owned()),
        Just("day".to_owned()),
        Just("March".to_owned()),
        Just("MAR".to_owned()),
        Just("abril".to_owned()),
        Just("Sept.".to_owned()),
        Just("quarter".to_owned()),
        Just("trimestre".to_owned()),
        Just("half".to_owned()),
        Just("third".to_owned()),
        Just("next".to_owned()),
        Just("fiscal".to_owned()),
        Just("ending".to_owned()),
        Just("years".to_owned()),
        Just("months".to_owned()),
        Just("twenty".to_owned()),
        Just("four".to_owned()),
        Just("tres".to_owned()),
        Just("años".to_owned()),
        Just("business".to_owned()),
        Just("anniversary".to_owned()),
        Just("$".to_owned()),
        Just("US$".to_owned()),
        Just("RM".to_owned()),
        Just("USD".to_owned()),
        Just("kr".to_owned()),
        Just("dollars".to_owned()),
        Just("millones".to_owned()),
        Just("mil".to_owned()),
        Just("M".to_owned()),
        Just("Wednesday".to_owned()),
        "\\PC{1,3}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

fn check_all(text: &str) -> Result<(), TestCaseError> {
    let conventions = Conventions::detect(text);
    let day = NaiveDate::from_ymd_opt(2024, 5, 17).unwrap_or_default();
    let placed = conventions.clone().with_reference_date(day);
    let dates = find_dates(text);
    well_formed(text, &dates).map_err(TestCaseError::fail)?;
    for s in slices(text, &dates) {
        let r = read_date(&s, &conventions);
        prop_assert!(!matches!(r, Err(DateError::NotADate(_))), "{s:?}: {r:?}");
    }
    let currencies = find_currencies(text);
    well_formed(text, &currencies).map_err(TestCaseError::fail)?;
    for s in slices(text, &currencies) {
        let r = read_currency(&s, &conventions);
        prop_assert!(
            !matches!(r, Err(CurrencyError::NotACurrency(_))),
            "{s:?}: {r:?}"
        );
    }
    let scales = find_scales(text);
    well_formed(text, &scales).map_err(TestCaseError::fail)?;
    for s in slices(text, &scales) {
        prop_assert!(read_scale(&s).is_ok(), "{s:?}");
    }
    let periods = find_periods(text);
    well_formed(text, &periods).map_err(TestCaseError::fail)?;
    for s in slices(text, &periods) {
        let r = read_period(&s, &placed);
        prop_assert!(
            !matches!(r, Err(PeriodError::NotAPeriod(_))),
            "{s:?}: {r:?}"
        );
    }
    let durations = find_durations(text);
    well_formed(text, &durations).map_err(TestCaseError::fail)?;
    for s in slices(text, &durations) {
        let r = read_duration(&s);
        prop_assert!(
            !matches!(r, Err(DurationError::NotADuration(_))),
            "{s:?}: {r:?}"
        );
    }
    // The readers on the whole text: any answer, no panic.
    let _ = read_date(text, &conventions);
    let _ = read_currency(text, &conventions);
    let _ = read_scale(text);
    let _ = read_period(text, &placed);
    let _ = read_duration(text);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn finders_and_readers_hold_on_documentish_text(text in documentish()) {
        check_all(&text)?;
    }

    #[test]
    fn finders_and_readers_hold_on_any_text(text in "\\PC{0,80}") {
        check_all(&text)?;
    }
}

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

/// A date written in one of the forms, with the conventions it reads by.
fn written_date() -> impl Strategy<Value = (NaiveDate, String, Conventions)> {
    (
        1950i32..2060,
        1u32..=12,
        1u32..=31,
        0usize..12,
        any::<bool>(),
    )
        .prop_filter_map("a calendar date", |(y, m, d, form, upper)| {
            let date = NaiveDate::from_ymd_opt(y, m, d)?;
            let en = EN_MONTHS[m as usize - 1];
            let abbr = &en[..3];
            let es = ES_MONTHS[m as usize - 1];
            let yy = y.rem_euclid(100);
            let dayfirst = Conventions::new().with_date_order(DateOrder::DayFirst);
            let monthfirst = Conventions::new().with_date_order(DateOrder::MonthFirst);
            let plain = Conventions::new();
            let (text, c) = match form {
                0 => (format!("{d:02}/{m:02}/{y}"), dayfirst),
                1 => (format!("{m}/{d}/{y}"), monthfirst),
                2 => (format!("{d:02}-{m:02}-{yy:02}"), dayfirst),
                3 => (format!("{y}-{m:02}-{d:02}"), plain),
                4 => (format!("{y}{m:02}{d:02}"), plain),
                5 => (format!("{d:02}.{m:02}.{y}"), dayfirst),
                6 => (format!("{d:02} {abbr} {y}"), plain),
                7 => (format!("{en} {d}, {y}"), plain),
                8 => (format!("{d} de {es} de {y}"), plain),
                9 => (format!("the {d}th day of {en}, {y}"), plain),
                10 => (format!("{d:02}/{abbr}/{y}"), plain),
                _ => (format!("{d:02} {abbr} {yy:02}"), plain),
            };
            let text = if upper { text.to_uppercase() } else { text };
            // Two-digit years read by chrono's pivot, 1969-2068.
            let two_digit = matches!(form, 2 | 11);
            if two_digit && !(1969..=2068).contains(&y) {
                return None;
            }
            if form == 4 && !(1900..=2099).contains(&y) {
                return None;
            }
            Some((date, text, c))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn written_dates_read_back_and_are_found_whole(
        (date, text, c) in written_date(),
        before in prop::sample::select(vec!["", "DATE: ", "Paid on ", "(", "fecha "]),
        after in prop::sample::select(vec!["", " 10:21", ".", ")", " by the parties", "\nTOTAL 5.00"]),
    ) {
        prop_assert_eq!(read_date(&text, &c).map(|d| d.date()), Ok(Some(date)), "{}", text);
        let doc = format!("{before}{text}{after}");
        prop_assert_eq!(slices(&doc, &find_dates(&doc)), vec![text.clone()], "{}", doc);
    }

    #[test]
    fn ambiguous_numeric_dates_are_reported_unless_the_order_is_known(
        a in 1u32..=12, b in 1u32..=12, y in 1990i32..2030,
    ) {
        prop_assume!(a != b);
        let text = format!("{a:02}/{b:02}/{y}");
        let err = read_date(&text, &Conventions::new());
        prop_assert!(matches!(err, Err(DateError::Ambiguous { ref readings, .. }) if readings.len() == 2), "{:?}", err);
        let dm = read_date(&text, &Conventions::new().with_date_order(DateOrder::DayFirst));
        let md = read_date(&text, &Conventions::new().with_date_order(DateOrder::MonthFirst));
        prop_assert_eq!(dm.map(|d| (d.day(), d.month())), Ok((Some(a), Some(b))));
        prop_assert_eq!(md.map(|d| (d.day(), d.month())), Ok((Some(b), Some(a))));
    }
}

fn english_words(n: u32) -> String {
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    match n {
        0..=19 => UNITS[n as usize].to_owned(),
        20..=99 if n.is_multiple_of(10) => TENS[n as usize / 10].to_owned(),
        20..=99 => format!("{}-{}", TENS[n as usize / 10], UNITS[n as usize % 10]),
        _ => n.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn written_durations_read_back_and_are_found_whole(
        n in 1u32..=99,
        unit in prop::sample::select(vec![("years", "year"), ("months", "month"), ("days", "day"), ("weeks", "week")]),
        form in 0usize..4,
    ) {
        let words = english_words(n);
        let plural = if n == 1 { unit.1 } else { unit.0 };
        let text = match form {
            0 => format!("{words} ({n}) {plural}"),
            1 => format!("{n} {plural}"),
            2 => format!("{words} {plural}"),
            _ => format!("{n}-{}", unit.1),
        };
        let read = read_duration(&text);
        prop_assert_eq!(read.as_ref().ok().and_then(DurationRead::whole), Some(n), "{}", text);
        prop_assert_eq!(read.map(|d| d.to_string()), Ok(format!("{n} {plural}")));
        let doc = format!("for {text} after the date");
        prop_assert_eq!(slices(&doc, &find_durations(&doc)), vec![text.clone()]);
        // A digit that disagrees with the words is an error, not a reading.
        let wrong = format!("{words} ({}) {plural}", n + 1);
        let is_mismatch = matches!(read_duration(&wrong), Err(DurationError::Mismatch { .. }));
        prop_assert!(is_mismatch);
    }

    #[test]
    fn written_periods_read_back_and_are_found_whole(
        q in 1u8..=4,
        y in 2000i32..2069,
        form in 0usize..6,
    ) {
        let ord = ["first", "second", "third", "fourth"][q as usize - 1];
        let es = ["primer", "segundo", "tercer", "cuarto"][q as usize - 1];
        let yy = y % 100;
        let (text, fiscal) = match form {
            0 => (format!("Q{q} {y}"), false),
            1 => (format!("{q}Q{yy:02}"), false),
            2 => (format!("the {ord} quarter of {y}"), false),
            3 => (format!("{es} trimestre de {y}"), false),
            4 => (format!("Q{q} FY{yy:02}"), true),
            _ => (format!("{ord} quarter of fiscal {y}"), true),
        };
        let want = PeriodRead::new(PeriodKind::Quarter(q), y, fiscal);
        prop_assert_eq!(read_period(&text, &Conventions::new()).ok(), want, "{}", text);
        let doc = format!("Revenue for {text}, up 5%.");
        prop_assert_eq!(slices(&doc, &find_periods(&doc)), vec![text.clone()]);
    }
}
