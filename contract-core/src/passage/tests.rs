use super::*;
use crate::source::PAGE_BREAK;

fn flat(passages: &[Passage]) -> Vec<String> {
    passages.iter().map(Passage::flat_text).collect()
}

/// Greedy wrapping at `width` columns, as a word processor or an OCR engine lays prose out.
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.join("\n")
}

/// Every passage's text is what its lines (and character range) say, and it is bounded.
fn assert_consistent(source: &Source, passages: &[Passage], max: usize) {
    for p in passages {
        assert!(
            p.char_count() <= max,
            "{} chars > {max}: {p:?}",
            p.char_count()
        );
        assert!(!p.text.is_empty());
        assert_eq!(p.text, p.text.trim(), "no whitespace at the ends");
        assert!(p.lines.start >= 1 && p.lines.start < p.lines.end);
        assert!(p.lines.end <= source.line_count() + 1);
        assert_eq!(source.page_of(p.lines.start), Some(p.page));
        match &p.chars {
            Some(c) => {
                assert_eq!(p.lines.len(), 1, "a character range lies in one line");
                let line = source.line(p.lines.start).unwrap_or_default();
                assert_eq!(line.get(c.clone()), Some(p.text.as_str()));
            }
            None => {
                // Line k of the text is source line `start + k`, trimmed (a sentence may start
                // or end inside its first or last line).
                let lines: Vec<&str> = p.text.split('\n').collect();
                assert_eq!(lines.len(), p.lines.len());
                for (k, l) in lines.iter().enumerate() {
                    let src = source.line(p.lines.start + k).unwrap_or_default().trim();
                    assert!(src.contains(l), "{l:?} not in line {}", p.lines.start + k);
                }
            }
        }
    }
}

#[test]
fn lines_are_trimmed_and_blank_lines_dropped() {
    let s = Source::from_text("  Revenue rose.  \n\n\t\nOutlook: flat\n");
    let p = Cutter::new().lines(&s);
    assert_eq!(
        p.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
        ["Revenue rose.", "Outlook: flat"]
    );
    assert_eq!(p[1].lines, 4..5);
    assert_eq!(p[0].kind, PassageKind::Line);
    assert_eq!(p[0].chars, None);
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
}

#[test]
fn a_name_split_over_two_ocr_lines_is_one_entry() {
    let text = "Policy Schedule\n\
                Insured: Northern Star Shipping\n\
                Company Limited\n\
                Policy No: 4471-B\n\
                Address: 12 Harbour Road,\n\
                Port Louis\n\
                Broker: Smith & Co. Ltd\n\
                Premium: USD 12,500";
    let s = Source::from_text(text);
    let p = Cutter::new().sentences(&s);
    assert_eq!(
        flat(&p),
        [
            "Policy Schedule",
            "Insured: Northern Star Shipping Company Limited",
            "Policy No: 4471-B",
            "Address: 12 Harbour Road, Port Louis",
            "Broker: Smith & Co. Ltd",
            "Premium: USD 12,500",
        ]
    );
    assert_eq!(p[1].lines, 2..4);
    assert_eq!(
        p[1].text,
        "Insured: Northern Star Shipping\nCompany Limited"
    );
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
}

#[test]
fn prose_wrapped_at_sixty_columns_is_cut_into_its_sentences() {
    let sentences = [
        "The Insurer shall indemnify the Insured against loss of or damage to the Property \
         caused by fire, lightning or explosion during the Period of Insurance.",
        "Acme Holdings International Limited reported revenue of USD 2,757 million for the \
         third quarter, up 7.5% on the year before.",
        "Claims must be notified to Mr. J. Smith of Acme Co. within 30 days of the loss, as \
         agreed under Section 4 of the U.S. addendum.",
        "No claim is payable for wear and tear!",
        "Is flood covered?",
        "Only where the Schedule says so.",
    ];
    let text = wrap(&sentences.join(" "), 60);
    assert!(text.lines().count() >= 8, "{text}");
    let s = Source::from_text(&text);
    let p = Cutter::new().sentences(&s);
    assert_eq!(flat(&p), sentences, "{text}");
    assert!(p.iter().all(|p| p.kind == PassageKind::Sentence));
    // Sentences start and end inside lines; line numbers stay the document's.
    assert!(p.iter().any(|p| p.lines.len() > 1));
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
    // Contiguous: each sentence starts on the line where the one before ends, or the next.
    for w in p.windows(2) {
        assert!(w[1].lines.start + 1 >= w[0].lines.end && w[1].lines.start < w[0].lines.end + 1);
    }
}

#[test]
fn lists_and_headings_are_not_joined() {
    let text = "EXCLUSIONS\n\
                War\n\
                Nuclear risks\n\
                Mould\n\
                \n\
                The insurer does not pay for:\n\
                - wear and tear\n\
                - gradual deterioration, rust or\n\
                  corrosion\n\
                (a) loss caused by an act of the\n\
                Insured\n\
                1. Terrorism\n\
                Section 3 Claims\n\
                Any claim must be made in writing";
    let s = Source::from_text(text);
    let p = Cutter::new().sentences(&s);
    assert_eq!(
        flat(&p),
        [
            "EXCLUSIONS",
            "War",
            "Nuclear risks",
            "Mould",
            "The insurer does not pay for:",
            "- wear and tear",
            "- gradual deterioration, rust or corrosion",
            "(a) loss caused by an act of the Insured",
            "1. Terrorism",
            "Section 3 Claims",
            "Any claim must be made in writing",
        ]
    );
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
}

#[test]
fn a_run_in_heading_is_read_with_the_sentence_it_heads() {
    let text = "9. GOVERNING LAW. This Agreement shall be governed by the laws of the\n\
                State of Delaware. Each party submits to its courts.\n\
                Governing Law.\n\
                This Agreement is governed by the laws of Oregon. Term. The term of this\n\
                Agreement is three years. Notices. Send them.\n\
                PARTIES:\n\
                Acme Widgets Inc. and Beta Tools LLC, each a Delaware company.";
    let s = Source::from_text(text);
    let p = Cutter::new().sentences(&s);
    assert_eq!(
        flat(&p),
        [
            // A run-in heading and its clause.
            "9. GOVERNING LAW. This Agreement shall be governed by the laws of the State of Delaware.",
            "Each party submits to its courts.",
            // A heading on a line of its own stays apart (a whole-line quote could copy it).
            "Governing Law.",
            "This Agreement is governed by the laws of Oregon.",
            "Term. The term of this Agreement is three years.",
            // A heading before a short sentence (not prose) stays apart.
            "Notices.",
            "Send them.",
            "PARTIES:",
            "Acme Widgets Inc. and Beta Tools LLC, each a Delaware company.",
        ]
    );
    assert_eq!(p[0].lines, 1..3);
    assert_eq!(p[0].chars, None);
    assert_eq!(p[4].lines, 4..6);
    assert_eq!(
        p[4].text,
        "Term. The term of this\nAgreement is three years."
    );
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
    // Within one line, the joined passage is the line's bytes from the heading on.
    let line =
        "Both parties sign this agreement today. Term. The term is three years from the date.";
    let one = Source::from_text(line);
    let p = Cutter::new().sentences(&one);
    assert_eq!(
        flat(&p),
        [
            "Both parties sign this agreement today.",
            "Term. The term is three years from the date."
        ]
    );
    assert_eq!(p[1].chars, Some(40..line.len()));
    assert_consistent(&one, &p, Cutter::DEFAULT_MAX_CHARS);
    // A heading and a sentence longer together than the bound stay apart.
    let p = Cutter::new().max_chars(40).sentences(&one);
    assert!(p.iter().any(|p| p.text == "Term."), "{p:?}");
    assert_consistent(&one, &p, 40);
    // On a page of short lines (a receipt) a line in capitals is an entry, never a heading.
    let receipt = Source::from_text("TOTAL. The amount paid in cash today was\n8.00\nCASH\n10.00");
    let p = Cutter::new().sentences(&receipt);
    assert!(p.iter().any(|p| p.text == "TOTAL."), "{p:?}");
}

#[test]
fn abbreviations_initials_and_acronyms_do_not_end_sentences() {
    let s = Source::from_text(
        "Acme Inc. and Beta Co. signed with Mr. Jones. See No. 4 of the U.S. filing by J. R. \
         Smith. Pagó la Sra. Pérez. Done.",
    );
    let p = Cutter::new().sentences(&s);
    assert_eq!(
        flat(&p),
        [
            "Acme Inc. and Beta Co. signed with Mr. Jones.",
            "See No. 4 of the U.S. filing by J. R. Smith.",
            "Pagó la Sra. Pérez.",
            "Done.",
        ]
    );
    // Each is part of the one line: its byte range within it.
    let line = s.line(1).unwrap_or_default();
    for x in &p {
        let c = x.chars.clone().expect("a part of the line");
        assert_eq!(&line[c], x.text);
    }
    // An abbreviation of one's own.
    let s = Source::from_text("Paid per Cl. Seven of the deed. Then stop.");
    assert_eq!(flat(&Cutter::new().sentences(&s)).len(), 3);
    assert_eq!(
        flat(&Cutter::new().abbreviation("Cl.").sentences(&s)),
        ["Paid per Cl. Seven of the deed.", "Then stop."]
    );
    // A line ending in an abbreviation does not end the sentence either.
    let s = Source::from_text("Payable to Acme Holdings Inc.\nand its subsidiaries.");
    assert_eq!(
        flat(&Cutter::new().sentences(&s)),
        ["Payable to Acme Holdings Inc. and its subsidiaries."]
    );
}

#[test]
fn windows_overlap_and_cover_the_document() {
    let text = (1..=10)
        .map(|i| {
            if i == 4 {
                String::new()
            } else {
                format!("line {i}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let s = Source::from_text(&text);
    let p = Cutter::new().windows(&s, 3, 1).expect("valid windows");
    // Non-empty lines 1,2,3,5,6,7,8,9,10: windows start every 2 of them.
    let ranges: Vec<_> = p.iter().map(|p| p.lines.clone()).collect();
    assert_eq!(ranges, [1..4, 3..7, 6..9, 8..11]);
    assert!(p.iter().all(|p| p.kind == PassageKind::Window));
    // The blank line is kept inside the text, so its lines number as the document's.
    assert_eq!(p[1].text, "line 3\n\nline 5\nline 6");
    assert_eq!(p[1].flat_text(), "line 3 line 5 line 6");
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
    assert_eq!(containing(&p, 3), [0, 1]);
    assert_eq!(containing(&p, 4), [1]);
    assert!(containing(&p, 11).is_empty());
    // Without overlap, a partition; one window when n exceeds the document.
    let q = Cutter::new().windows(&s, 4, 0).expect("valid");
    assert_eq!(
        q.iter().map(|p| p.lines.clone()).collect::<Vec<_>>(),
        [1..6, 6..10, 10..11]
    );
    assert_eq!(Cutter::new().windows(&s, 50, 3).expect("valid").len(), 1);
    assert_eq!(
        Cutter::new().windows(&s, 3, 3),
        Err(PassageError::NoStride { n: 3, overlap: 3 })
    );
    assert_eq!(
        Cutter::new().windows(&s, 0, 0),
        Err(PassageError::EmptyWindow)
    );
    // A window over the bound becomes shorter runs of lines, each place once.
    let r = Cutter::new()
        .max_chars(14)
        .windows(&s, 3, 1)
        .expect("valid");
    assert_consistent(&s, &r, 14);
    let mut places: Vec<_> = r.iter().map(|p| p.lines.clone()).collect();
    let n = places.len();
    places.dedup();
    assert_eq!(places.len(), n, "no place twice");
}

#[test]
fn pages_are_passages_and_long_pages_become_windows() {
    let s = Source::from_text("Cover page\n\x0c\n\n\x0cTerms one.\nTerms two.\x0cLast page");
    assert_eq!(s.page_count(), 4);
    let p = Cutter::new().pages(&s);
    assert_eq!(
        p.iter()
            .map(|p| (p.page, p.text.as_str()))
            .collect::<Vec<_>>(),
        [
            (1, "Cover page"),
            (3, "Terms one.\nTerms two."),
            (4, "Last page")
        ]
    );
    assert!(p.iter().all(|p| p.kind == PassageKind::Page));
    assert_consistent(&s, &p, Cutter::DEFAULT_MAX_CHARS);
    let long = (1..=40)
        .map(|i| format!("clause {i:02} of the page"))
        .collect::<Vec<_>>()
        .join("\n");
    let s = Source::from_pages(&["short", long.as_str()]);
    let p = Cutter::new().max_chars(100).pages(&s);
    assert_consistent(&s, &p, 100);
    assert_eq!(p[0].kind, PassageKind::Page);
    assert!(p[1..]
        .iter()
        .all(|p| p.kind == PassageKind::Window && p.page == 2));
    // The windows partition the long page's lines.
    let mut next = 2;
    for w in &p[1..] {
        assert_eq!(w.lines.start, next);
        next = w.lines.end;
    }
    assert_eq!(next, 42);
}

/// A line of `n` characters: words of 1 to 12 letters and, every so often, a long run with no
/// space at all (a URL, base64), where the cutter must cut inside the word.
fn giant_line(n: usize) -> String {
    let mut s = String::with_capacity(n + 32);
    let mut k: u64 = 7;
    while s.len() < n {
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = if k.is_multiple_of(97) {
            1500
        } else {
            1 + (k >> 33) as usize % 12
        };
        for j in 0..len {
            s.push((b'a' + ((k >> 20) as usize + j) as u8 % 26) as char);
        }
        s.push(if k.is_multiple_of(13) { '.' } else { ' ' });
        if k.is_multiple_of(13) {
            s.push(' ');
        }
    }
    s.truncate(n);
    s
}

#[test]
fn a_giant_line_becomes_pieces_in_order_quickly() {
    let line = giant_line(200_000);
    let s = Source::from_text(&line);
    for name in ["lines", "sentences", "windows", "pages"] {
        let t0 = std::time::Instant::now();
        let cut = match name {
            "lines" => Cutter::new().lines(&s),
            "sentences" => Cutter::new().sentences(&s),
            "windows" => Cutter::new().windows(&s, 5, 2).unwrap_or_default(),
            _ => Cutter::new().pages(&s),
        };
        println!(
            "{name}: {} passages of a 200,000-char line in {:.2} ms",
            cut.len(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        assert!(cut.len() >= 200_000 / Cutter::DEFAULT_MAX_CHARS, "{name}");
        assert_consistent(&s, &cut, Cutter::DEFAULT_MAX_CHARS);
        // In order, not overlapping, only whitespace between them, covering the line.
        let mut at = 0;
        for p in &cut {
            let c = p.chars.clone().expect("a piece of the line");
            assert!(line[at..c.start].trim().is_empty(), "{name}: a gap at {at}");
            at = c.end;
        }
        assert!(line[at..].trim().is_empty(), "{name}: the end is covered");
        if name != "sentences" {
            assert!(cut.iter().all(|p| p.kind == PassageKind::Piece), "{name}");
        }
    }
    // Cut inside a word only where a word is longer than the bound.
    let pieces = Cutter::new().lines(&s);
    let inside = pieces
        .iter()
        .filter(|p| {
            p.chars
                .as_ref()
                .is_some_and(|c| line[c.end..].starts_with(char::is_alphabetic))
        })
        .count();
    assert!(inside > 0, "the 1,500-letter words are cut");
}

#[test]
fn a_document_of_thirty_thousand_short_lines_is_cut_quickly() {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 2_000_000 {
        i += 1;
        let line = match i % 7 {
            0 => String::new(),
            1 => format!("{i}. The insured shall notify the insurer of claim {i} within"),
            2 => "thirty days of the loss, and shall provide evidence of it.".to_owned(),
            3 => format!("- item {i}"),
            _ => {
                format!("Revenue for line {i} was USD {i},000 in total, up 3% on the year. Noted.")
            }
        };
        text.push_str(&line);
        text.push('\n');
        if i % 500 == 0 {
            text.push(PAGE_BREAK);
        }
    }
    let s = Source::from_text(&text);
    assert!(s.line_count() >= 30_000, "{}", s.line_count());
    let filled = (1..=s.line_count())
        .filter(|&n| !s.line(n).unwrap_or_default().trim().is_empty())
        .count();
    let cutter = Cutter::new();
    let t0 = std::time::Instant::now();
    let lines = cutter.lines(&s);
    let t_lines = t0.elapsed();
    let t0 = std::time::Instant::now();
    let sentences = cutter.sentences(&s);
    let t_sentences = t0.elapsed();
    let t0 = std::time::Instant::now();
    let windows = cutter.windows(&s, 8, 2).expect("valid");
    let t_windows = t0.elapsed();
    let t0 = std::time::Instant::now();
    let pages = cutter.pages(&s);
    let t_pages = t0.elapsed();
    println!(
        "{} lines, {} bytes: lines {} in {:.1} ms, sentences {} in {:.1} ms, windows {} in {:.1} ms, pages {} in {:.1} ms",
        s.line_count(),
        text.len(),
        lines.len(),
        t_lines.as_secs_f64() * 1e3,
        sentences.len(),
        t_sentences.as_secs_f64() * 1e3,
        windows.len(),
        t_windows.as_secs_f64() * 1e3,
        pages.len(),
        t_pages.as_secs_f64() * 1e3,
    );
    assert_eq!(lines.len(), filled);
    // Numbered clause + its continuation joined; the rest are sentences of their lines.
    assert!(sentences.len() < filled * 2 && sentences.len() > filled / 2);
    assert!(sentences.iter().any(|p| p
        .flat_text()
        .ends_with("within thirty days of the loss, and shall provide evidence of it.")));
    assert_eq!(windows.len(), (filled - 8).div_ceil(6) + 1);
    assert!(
        pages.len() > s.page_count(),
        "pages over the bound became windows"
    );
    for cut in [&lines, &sentences, &windows, &pages] {
        assert_consistent(&s, cut, Cutter::DEFAULT_MAX_CHARS);
    }
}

#[test]
fn empty_and_blank_documents_have_no_passages() {
    for text in ["", "\n\n", "   \t \n \r\n", "\x0c\x0c", " \x0c \n"] {
        let s = Source::from_text(text);
        let c = Cutter::new();
        assert!(c.lines(&s).is_empty(), "{text:?}");
        assert!(c.sentences(&s).is_empty(), "{text:?}");
        assert!(c.windows(&s, 3, 1).expect("valid").is_empty(), "{text:?}");
        assert!(c.pages(&s).is_empty(), "{text:?}");
    }
}

#[test]
fn crlf_and_form_feeds() {
    let s = Source::from_text(
        "Insured: Acme\r\nHoldings Limited\r\n\r\nTerms apply.\r\n\x0cPage two\r\nends here.",
    );
    let p = Cutter::new().sentences(&s);
    assert_eq!(
        flat(&p),
        [
            "Insured: Acme Holdings Limited",
            "Terms apply.",
            "Page two ends here."
        ]
    );
    assert!(p.iter().all(|p| !p.text.contains('\r')));
    assert_eq!((p[2].page, p[2].lines.clone()), (2, 5..7));
    // A sentence does not run on over a page break.
    let s = Source::from_text("The insurer pays for\x0cdamage by fire.");
    assert_eq!(
        flat(&Cutter::new().sentences(&s)),
        ["The insurer pays for", "damage by fire."]
    );
    let l = Cutter::new().lines(&s);
    assert_eq!((l[1].page, l[1].lines.clone()), (2, 2..3));
}

#[test]
fn dedupe_keeps_places_not_texts() {
    let s = Source::from_text("Total\nTotal\nTotal");
    let mut p = Cutter::new().lines(&s);
    assert_eq!(p.len(), 3);
    p.extend(Cutter::new().lines(&s));
    let d = dedupe(p);
    assert_eq!(
        d.iter().map(|p| p.lines.clone()).collect::<Vec<_>>(),
        [1..2, 2..3, 3..4]
    );
    // Two pieces of one line at different bytes stay two.
    let s = Source::from_text("abc abc");
    let p = dedupe(Cutter::new().max_chars(3).lines(&s));
    assert_eq!(
        p.iter().map(|p| p.chars.clone()).collect::<Vec<_>>(),
        [Some(0..3), Some(4..7)]
    );
}

#[test]
fn words_are_cut_at_spaces_within_the_bound() {
    assert_eq!(cut_words("aa bb cc", 5), [0..5, 6..8]);
    assert_eq!(cut_words("aa bb cc", 2), [0..2, 3..5, 6..8]);
    assert_eq!(cut_words("abcdefgh", 3), [0..3, 3..6, 6..8]);
    assert_eq!(cut_words("ab   cdefgh ij", 4), [0..2, 5..9, 9..11, 12..14]);
    assert_eq!(cut_words("é é é", 3), [0..5, 6..8]);
    assert!(cut_words("", 3).is_empty());
}

#[test]
fn the_opening_is_the_passages_that_start_within_its_characters() {
    // Line 1 is 10 characters and its break, line 2 starts at 11, line 4 at 31; the second
    // sentence of line 2 starts at character 11 + 13 = 24.
    let text = "0123456789\nFirst words. Then more.\n\n\nLater on.\nLast line here.";
    let source = Source::from_text(text);
    let passages = Cutter::default().sentences(&source);
    let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "0123456789",
            "First words.",
            "Then more.",
            "Later on.",
            "Last line here."
        ]
    );
    let opening = |chars: usize| -> Vec<&str> {
        opening(&passages, &source, chars)
            .into_iter()
            .map(|i| texts[i])
            .collect()
    };
    assert!(opening(0).is_empty());
    assert_eq!(opening(1), ["0123456789"]);
    assert_eq!(opening(11), ["0123456789"]);
    assert_eq!(opening(12), ["0123456789", "First words."]);
    assert_eq!(opening(24), ["0123456789", "First words."]);
    assert_eq!(opening(25), ["0123456789", "First words.", "Then more."]);
    // Blank lines count with their breaks: "Later on." starts at 11 + 24 + 1 + 1 = 37.
    assert_eq!(opening(37).len(), 3);
    assert_eq!(opening(38).len(), 4);
    assert_eq!(opening(usize::MAX).len(), 5);
    // A line of many characters: the offset counts characters, not bytes.
    let source = Source::from_text("ééééé\nnext");
    let passages = Cutter::default().lines(&source);
    assert_eq!(super::opening(&passages, &source, 6), [0]);
    assert_eq!(super::opening(&passages, &source, 7), [0, 1]);
}
