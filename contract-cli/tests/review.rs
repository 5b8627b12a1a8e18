//! The review page: well-formed HTML (html5ever reports no parse error), self-contained,
//! document text never markup, one highlight per grounded value at its offsets.

mod common;

use std::collections::HashMap;
use std::fs;

use common::*;
use scraper::{Html, Selector};
use serde_json::Value;

fn select(doc: &Html, css: &str) -> usize {
    let sel = Selector::parse(css).unwrap_or_else(|e| panic!("{css}: {e:?}"));
    doc.select(&sel).count()
}

/// Extracts the example invoices (scripted) with `--html`, and the same page with `review`.
/// `name`: the test's own scratch folder (the tests run at once).
fn pages(name: &str) -> (String, String, std::path::PathBuf) {
    let dir = scratch(name);
    let out = dir.join("rows.jsonl");
    let html = dir.join("extract.html");
    let run = Extract::invoices(&out)
        .scripted(&data("invoice-replies.jsonl"))
        .args(&["--html", path(&html)])
        .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let review_html = dir.join("review.html");
    let run = review(
        &out,
        &data("invoices.jsonl"),
        &review_html,
        &["--title", "Invoice"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let a = fs::read_to_string(&html).unwrap_or_default();
    let b = fs::read_to_string(&review_html).unwrap_or_default();
    (a, b, out)
}

#[test]
fn the_page_is_well_formed_self_contained_and_escapes_documents() {
    let (from_extract, from_review, _) = pages("review_well_formed");
    assert_eq!(
        from_extract, from_review,
        "`extract --html` writes the page `review` writes"
    );
    let page = Html::parse_document(&from_review);
    assert!(
        page.errors.is_empty(),
        "HTML parse errors: {:?}",
        page.errors
    );
    // Self-contained: nothing loaded from anywhere.
    assert_eq!(
        select(&page, "link, img, iframe, object, embed, [src], [href]"),
        0
    );
    assert_eq!(
        select(&page, "script"),
        2,
        "the data and the page's own script"
    );
    assert_eq!(select(&page, "style"), 1);
    // inv-5 holds `</script><img src=x onerror=alert(1)>` and `<b>`: still one data script,
    // no element from a document.
    assert_eq!(select(&page, "b"), 0);
    let data_sel = Selector::parse("script#data").unwrap_or_else(|e| panic!("{e:?}"));
    let script = page
        .select(&data_sel)
        .next()
        .unwrap_or_else(|| panic!("no data script"));
    let raw: String = script.text().collect();
    assert!(!raw.contains('<'), "`<` escaped in the data");
    let embedded: Value =
        serde_json::from_str(&raw).unwrap_or_else(|e| panic!("data is JSON: {e}"));
    let docs = docs_by_id(&data("invoices.jsonl"));
    let shown: HashMap<String, String> = embedded["docs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let text: String = d["segments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s[0].as_str())
                .collect();
            (d["id"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect();
    assert_eq!(shown, docs, "every document's text, whole and unchanged");
    assert!(shown["inv-5"].contains("</script><img src=x onerror=alert(1)>"));
    // The page's script never writes markup from data.
    assert!(!from_review.contains("innerHTML") && !from_review.contains("insertAdjacentHTML"));
}

#[test]
fn one_highlight_per_grounded_value_at_its_offsets() {
    let (_, html, out) = pages("review_highlights");
    let page = Html::parse_document(&html);
    let data_sel = Selector::parse("script#data").unwrap_or_else(|e| panic!("{e:?}"));
    let raw: String = page.select(&data_sel).flat_map(|s| s.text()).collect();
    let embedded: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{e}"));
    let rows = rows_by_id(&out);
    let docs = docs_by_id(&data("invoices.jsonl"));
    let mut grounded_total = 0;
    for d in embedded["docs"].as_array().into_iter().flatten() {
        let id = d["id"].as_str().unwrap_or_default();
        let text = &docs[id];
        let values = d["values"].as_array().cloned().unwrap_or_default();
        // Every grounded value of the row's value has exactly one highlight.
        let row_value = &rows[id]["value"];
        let grounded: Vec<&Value> = values.iter().filter(|v| v["grounded"] == true).collect();
        for path in ["/seller", "/invoice_number", "/date", "/total"] {
            let present = row_value.pointer(path).is_some_and(|v| !v.is_null());
            let n = grounded.iter().filter(|v| v["path"] == path).count();
            assert_eq!(n, usize::from(present), "{id}{path}");
        }
        grounded_total += grounded.len();
        // The segments covering value i, in order, are exactly its evidence.
        let mut at = 0usize;
        let mut spans: HashMap<usize, (usize, usize)> = HashMap::new();
        for s in d["segments"].as_array().into_iter().flatten() {
            let piece = s[0].as_str().unwrap_or_default();
            for i in s[1]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
            {
                let e = spans.entry(i as usize).or_insert((at, at));
                assert_eq!(e.1, at, "{id}: value {i} highlighted in one run");
                e.1 = at + piece.len();
            }
            at += piece.len();
        }
        for (i, v) in values.iter().enumerate() {
            let (s, e) = spans
                .get(&i)
                .copied()
                .unwrap_or_else(|| panic!("{id}: value {i} has no highlight"));
            assert_eq!(
                (s as u64, e as u64),
                (
                    v["start"].as_u64().unwrap_or(0),
                    v["end"].as_u64().unwrap_or(0)
                ),
                "{id}: {v}"
            );
            assert_eq!(
                Some(v["written"].as_str().unwrap_or_default()),
                text.get(s..e),
                "{id}: {v}"
            );
            if let Some(sv) = v["value"].as_str() {
                assert_eq!(
                    text[s..e].split_whitespace().collect::<Vec<_>>(),
                    sv.split_whitespace().collect::<Vec<_>>()
                );
            }
        }
    }
    // inv-1: 4, inv-2: 4, inv-3: 4, inv-4: none, inv-5: 4.
    assert_eq!(grounded_total, 16);
}

#[test]
fn thousands_of_documents_make_one_page_that_parses() {
    let dir = scratch("review_many");
    let mut docs = String::new();
    let mut rows = String::new();
    for i in 0..3000 {
        let text = format!("Seller {i} SA\nTotal: {i} EUR\n<script>alert({i})</script>");
        docs.push_str(&serde_json::json!({"id": format!("d{i}"), "text": text}).to_string());
        docs.push('\n');
        let start = 0;
        let end = format!("Seller {i} SA").len();
        rows.push_str(&serde_json::json!({
            "id": format!("d{i}"), "outcome": if i % 7 == 0 { "invalid" } else { "valid" },
            "ok": i % 7 != 0, "value": {"seller": format!("Seller {i} SA")}, "level": "strict",
            "violations": [], "not_in_source": [],
            "evidence": [{"path": "/seller", "value": format!("Seller {i} SA"), "start": start, "end": end, "written": "", "grounded": true},
                         {"path": "/bogus", "value": 1, "start": 5, "end": 100000, "written": "", "grounded": true}],
        }).to_string());
        rows.push('\n');
    }
    // A torn last row from an interrupted run is skipped, not fatal.
    rows.push_str("{\"id\": \"d9999\", \"outc");
    fs::write(dir.join("docs.jsonl"), docs).unwrap_or_else(|e| panic!("{e}"));
    fs::write(dir.join("rows.jsonl"), rows).unwrap_or_else(|e| panic!("{e}"));
    let html = dir.join("review.html");
    let run = review(
        &dir.join("rows.jsonl"),
        path(&dir.join("docs.jsonl")),
        &html,
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("torn"), "{}", run.stderr);
    let text = fs::read_to_string(&html).unwrap_or_default();
    let page = Html::parse_document(&text);
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert_eq!(select(&page, "script"), 2);
    let data_sel = Selector::parse("script#data").unwrap_or_else(|e| panic!("{e:?}"));
    let raw: String = page.select(&data_sel).flat_map(|s| s.text()).collect();
    let embedded: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{e}"));
    let all = embedded["docs"].as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 3000);
    // Offsets outside the text (rows are input too) are dropped, the good ones kept.
    assert!(all
        .iter()
        .all(|d| d["values"].as_array().map(Vec::len) == Some(1)));
    // Pages of 50 are built by the script, not 3000 articles up front.
    assert!(text.contains("var PAGE = 50"));
    assert_eq!(select(&page, "article"), 0);
}

/// Chromium, when this machine has it (`CHROMIUM`, else `chromium` on the PATH).
fn chromium() -> Option<String> {
    if let Ok(c) = std::env::var("CHROMIUM") {
        return Some(c);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

/// The page as a browser draws it: the script's highlights are `<mark>`s over exactly the
/// highlighted segments, and a document's markup stays text. Skipped (with a note) where no
/// Chromium is installed; `scripts/screenshot-review.sh` runs the same browser by hand.
#[test]
fn in_chromium_the_script_draws_the_highlights_and_no_document_markup() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no Chromium (apt-get install chromium, or set CHROMIUM)");
        return;
    };
    let (_, html, _) = pages("review_chromium");
    let dir = scratch("review_chromium_page");
    let file = dir.join("page.html");
    fs::write(&file, &html).unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(&browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--proxy-server=127.0.0.1:9",
            &format!("--user-data-dir={}", path(&dir.join("profile"))),
            "--dump-dom",
            &format!("file://{}", path(&file)),
        ])
        .output()
        .unwrap_or_else(|e| panic!("{browser}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = Html::parse_document(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(select(&dom, "article"), 5, "one article per document");
    assert_eq!(select(&dom, "article img, article b, article script"), 0);
    let page = Html::parse_document(&html);
    let data_sel = Selector::parse("script#data").unwrap_or_else(|e| panic!("{e:?}"));
    let raw: String = page.select(&data_sel).flat_map(|s| s.text()).collect();
    let embedded: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{e}"));
    let expected: Vec<String> = embedded["docs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["segments"].as_array().cloned().unwrap_or_default())
        .filter(|s| s[1].as_array().is_some_and(|v| !v.is_empty()))
        .map(|s| s[0].as_str().unwrap_or_default().to_owned())
        .collect();
    let mark = Selector::parse("article mark").unwrap_or_else(|e| panic!("{e:?}"));
    let drawn: Vec<String> = dom.select(&mark).map(|m| m.text().collect()).collect();
    assert_eq!(drawn, expected);
    assert!(drawn.len() >= 16);
    let pre = Selector::parse("article pre.text").unwrap_or_else(|e| panic!("{e:?}"));
    let texts: Vec<String> = dom.select(&pre).map(|p| p.text().collect()).collect();
    assert!(texts
        .iter()
        .any(|t| t.contains("</script><img src=x onerror=alert(1)>")));
}
