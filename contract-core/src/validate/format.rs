//! String formats.
//!
//! Each check follows the JSON Schema draft 2020-12 definition of the format as the `jsonschema`
//! crate implements it (the differential test compares them), so a value accepted here is
//! accepted by a schema validator and the other way round.

use std::net::{Ipv4Addr, Ipv6Addr};

use chrono::NaiveDate;

use crate::attrs::Format;

/// Whether `text` is a valid `format` value.
///
/// - `date`: RFC 3339 full-date (`2024-03-15`), a real calendar date.
/// - `date-time`: RFC 3339 date-time (`2024-03-15T10:00:00Z`, `T` or `t`, offset required).
/// - `time`: RFC 3339 full-time with offset (`10:00:00Z`, `10:00:00.5+02:00`).
/// - `email`: one unquoted `@`, a non-empty dot-atom local part, a host name or an address
///   literal (`[192.0.2.1]`, `[IPv6:::1]`) as domain.
/// - `uuid`: hyphenated 8-4-4-4-12 hex digits.
/// - `ipv4` / `ipv6`: what the standard library parses (no leading zeros in IPv4).
/// - `hostname`: RFC 1123 labels (letters, digits, inner hyphens, 1-63 characters), at most
///   253 characters, no trailing dot.
pub fn format_ok(format: Format, text: &str) -> bool {
    match format {
        Format::Date => is_date(text),
        Format::DateTime => is_date_time(text),
        Format::Time => is_time(text),
        Format::Email => is_email(text),
        Format::Uuid => is_uuid(text),
        Format::Ipv4 => text.parse::<Ipv4Addr>().is_ok(),
        Format::Ipv6 => text.parse::<Ipv6Addr>().is_ok(),
        Format::Hostname => is_hostname(text),
    }
}

/// `n` ASCII digits as a number, or `None`.
fn digits(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        bytes
            .iter()
            .fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0')),
    )
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(&b[..4]), digits(&b[5..7]), digits(&b[8..]))
    else {
        return false;
    };
    // `year` has four digits, so it always fits an i32.
    NaiveDate::from_ymd_opt(year as i32, month, day).is_some()
}

fn is_time(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) =
        (digits(&b[..2]), digits(&b[3..5]), digits(&b[6..8]))
    else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut i = 8;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    let Some(&sign) = b.get(i) else {
        return false;
    };
    // The UTC time of the value, in minutes after midnight: a leap second is only valid at
    // 23:59 UTC.
    let local = (hour * 60 + minute) as i32;
    let utc = match sign {
        b'Z' | b'z' if i + 1 == b.len() => local,
        b'+' | b'-' => {
            let off = &b[i + 1..];
            if off.len() != 5 || off[2] != b':' {
                return false;
            }
            let (Some(oh), Some(om)) = (digits(&off[..2]), digits(&off[3..])) else {
                return false;
            };
            if oh > 23 || om > 59 {
                return false;
            }
            let offset = (oh * 60 + om) as i32;
            if sign == b'+' {
                local - offset
            } else {
                local + offset
            }
        }
        _ => return false,
    };
    second != 60 || utc.rem_euclid(24 * 60) == 23 * 60 + 59
}

fn is_date_time(text: &str) -> bool {
    match text.find(['T', 't']) {
        Some(t) => is_date(&text[..t]) && is_time(&text[t + 1..]),
        None => false,
    }
}

fn is_uuid(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_hostname(text: &str) -> bool {
    if text.is_empty() || text.len() > 253 {
        return false;
    }
    text.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            // RFC 5891: `??--` labels are reserved for A-labels (`xn--`).
            && !(b.len() >= 4 && &b[2..4] == b"--" && !label[..2].eq_ignore_ascii_case("xn"))
    })
}

/// Characters of an unquoted local part besides letters and digits (RFC 5322 `atext`).
const ATEXT: &[u8] = b"!#$%&'*+-/=?^_`{|}~";

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local.split('.').all(|atom| {
            !atom.is_empty()
                && atom
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || ATEXT.contains(&c))
        });
    if !local_ok || domain.len() > 254 {
        return false;
    }
    match domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        Some(literal) => match literal.get(..5) {
            Some(tag) if tag.eq_ignore_ascii_case("IPv6:") => {
                literal[5..].parse::<Ipv6Addr>().is_ok()
            }
            _ => literal.parse::<Ipv4Addr>().is_ok(),
        },
        None => is_hostname(domain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        for ok in [
            "2024-03-15",
            "2024-02-29",
            "2000-02-29",
            "0001-01-01",
            "9999-12-31",
        ] {
            assert!(format_ok(Format::Date, ok), "{ok}");
        }
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "2024-3-15",
            "24-03-15",
            "2024-03-15T",
            "2024/03/15",
            "２０２４-03-15",
            "",
            "2024-03-1a",
        ] {
            assert!(!format_ok(Format::Date, bad), "{bad}");
        }
    }

    #[test]
    fn times_and_date_times() {
        for ok in [
            "10:00:00Z",
            "10:00:00.5+02:00",
            "23:59:60Z",
            "00:59:60+01:00",
            "10:00:00z",
            "10:00:00-23:59",
        ] {
            assert!(format_ok(Format::Time, ok), "{ok}");
        }
        for bad in [
            "10:00:00",
            "24:00:00Z",
            "10:60:00Z",
            "10:00:60Z",
            "10:00:00.Z",
            "10:00:00+2:00",
            "10:00:00+24:00",
            "10:00Z",
            "10:00:00ZZ",
            "",
        ] {
            assert!(!format_ok(Format::Time, bad), "{bad}");
        }
        assert!(format_ok(Format::DateTime, "2024-03-15T10:00:00Z"));
        assert!(format_ok(Format::DateTime, "2024-03-15t10:00:00.123-05:00"));
        assert!(!format_ok(Format::DateTime, "2024-03-15 10:00:00Z"));
        assert!(!format_ok(Format::DateTime, "2024-02-30T10:00:00Z"));
        assert!(!format_ok(Format::DateTime, "2024-03-15T10:00:00"));
    }

    #[test]
    fn emails() {
        for ok in [
            "a@example.com",
            "first.last+tag@sub.example.co",
            "x@localhost",
            "a@[192.0.2.1]",
            "a@[IPv6:::1]",
        ] {
            assert!(format_ok(Format::Email, ok), "{ok}");
        }
        for bad in [
            "",
            "@example.com",
            "a@",
            "a b@example.com",
            "a@@example.com",
            "a@exa mple.com",
            "a@-example.com",
            ".a@example.com",
            "a..b@example.com",
            "a@example.com.",
        ] {
            assert!(!format_ok(Format::Email, bad), "{bad}");
        }
    }

    #[test]
    fn uuids_ips_hostnames() {
        assert!(format_ok(
            Format::Uuid,
            "123e4567-e89b-12d3-a456-426614174000"
        ));
        assert!(format_ok(
            Format::Uuid,
            "123E4567-E89B-12D3-A456-426614174000"
        ));
        assert!(!format_ok(Format::Uuid, "123e4567e89b12d3a456426614174000"));
        assert!(!format_ok(
            Format::Uuid,
            "123e4567-e89b-12d3-a456-42661417400g"
        ));
        assert!(format_ok(Format::Ipv4, "192.168.0.1"));
        assert!(!format_ok(Format::Ipv4, "192.168.0.01"));
        assert!(!format_ok(Format::Ipv4, "256.1.1.1"));
        assert!(format_ok(Format::Ipv6, "::1"));
        assert!(format_ok(Format::Ipv6, "2001:db8::8a2e:370:7334"));
        assert!(!format_ok(Format::Ipv6, "2001:db8:::1"));
        assert!(format_ok(Format::Hostname, "example.com"));
        assert!(format_ok(Format::Hostname, "a-b.c1"));
        assert!(format_ok(Format::Hostname, "xn--bcher-kva.example"));
        assert!(!format_ok(Format::Hostname, "ab--c.example"));
        assert!(!format_ok(Format::Hostname, "-a.com"));
        assert!(!format_ok(Format::Hostname, "a_b.com"));
        assert!(!format_ok(Format::Hostname, "example.com."));
        assert!(!format_ok(Format::Hostname, &"a".repeat(64)));
        assert!(!format_ok(Format::Hostname, &["a"; 128].join(".")));
    }
}
