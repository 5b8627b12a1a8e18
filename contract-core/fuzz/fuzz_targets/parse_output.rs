//! `parse_output` over arbitrary bytes (lossy UTF-8): never a panic, work linear in the length.
#![no_main]

use contract_core::parse::{parse_output, recover, work_units};
use contract_core::Contract;
use libfuzzer_sys::fuzz_target;

/// Next-quarter revenue guidance (the shape of `examples::Guidance`).
#[derive(Contract, Debug, serde::Serialize, serde::Deserialize)]
#[contract(rule = "low <= high", both_or_neither(low, high))]
pub struct Guidance {
    /// Fiscal quarter.
    #[contract(range = 1..=4)]
    pub quarter: Option<u8>,
    /// Fiscal year.
    #[contract(range = 2018..=2030)]
    pub year: Option<u16>,
    /// Low end.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    pub low: Option<f64>,
    /// High end.
    #[contract(exclusive_min = 0, unit = "USD millions")]
    pub high: Option<f64>,
}

fuzz_target!(|data: &[u8]| {
    let raw = String::from_utf8_lossy(data);
    let parsed = parse_output::<Guidance>(&raw);
    let rec = recover(&raw);
    assert_eq!(parsed.level, rec.level);
    assert_eq!(parsed.json, rec.json);
    // Whatever the input, the recovered object is an object and every repair points into it.
    if let Some(json) = &rec.json {
        assert!(json.is_object());
    }
    for r in &rec.repairs {
        assert!(r.offset <= raw.len());
    }
    // Linear work: a generous constant per byte.
    let work = work_units(&raw);
    assert!(
        work <= 64 * raw.len() + 64,
        "work {work} for {} bytes",
        raw.len()
    );
});
