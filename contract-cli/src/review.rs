//! The review page: one self-contained HTML file (inline style and script, no network) showing
//! every document with its extracted values highlighted where the document writes them.
//!
//! The documents travel as JSON inside `<script type="application/json">`, every `<`, `>` and
//! `&` written as a `\u` escape, so no document text can close the script or open a tag; the
//! page's script builds each page of documents with `textContent` only (never `innerHTML`), 50
//! documents a page, so thousands of documents stay quick. The highlights are computed here:
//! each document's text is cut into segments, each segment listing the values whose evidence
//! covers it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{json, Value};

use crate::inputs::Doc;

/// One piece of a document: its text and the values (indices into [`DocView::values`]) whose
/// evidence covers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment(pub String, pub Vec<usize>);

/// A highlighted value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueView {
    /// JSON pointer in the row's value.
    pub path: String,
    /// The field's colour (index into the page's palette; one per top-level field).
    pub color: usize,
    /// The value as extracted (its normalised form).
    pub value: Value,
    /// The evidence as written.
    pub written: String,
    /// Whether the schema grounds it.
    pub grounded: bool,
    /// Byte offsets of the evidence in the text.
    pub start: usize,
    /// End of the evidence (exclusive).
    pub end: usize,
}

/// One document as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocView {
    /// The id.
    pub id: String,
    /// `valid`, `empty`, `invalid`, `error`, or `missing` (a document without a row).
    pub outcome: String,
    /// Whether a retry was needed.
    pub retried: bool,
    /// The ladder level of the reported reply.
    pub level: String,
    /// Wall time, in milliseconds, when the row has it.
    pub ms: Option<f64>,
    /// Attempts made.
    pub attempts: usize,
    /// Why the row has no value.
    pub error: Option<String>,
    /// The violations (`{path, kind, message}`).
    pub violations: Vec<Value>,
    /// The attempts before the reported one: `{level, violations, error}` each.
    pub earlier: Vec<Value>,
    /// Values the document does not write: `[path, value]`.
    pub not_in_source: Vec<(String, Value)>,
    /// The value (or the invalid reply's JSON), pretty-printed.
    pub json: String,
    /// The text, cut at the evidence boundaries; empty when the document is unknown.
    pub segments: Vec<Segment>,
    /// Whether the document text was found.
    pub has_text: bool,
    /// The highlighted values.
    pub values: Vec<ValueView>,
}

/// The page's data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    /// The title (the contract's name, when known).
    pub title: String,
    /// The top-level fields, in colour order.
    pub fields: Vec<String>,
    /// The documents.
    pub docs: Vec<DocView>,
}

/// The top-level field of a pointer (`/items/0/name` → `items`).
fn field_of(path: &str) -> String {
    path.trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default()
        .replace("~1", "/")
        .replace("~0", "~")
}

/// The page data of `rows` over `docs`: every row (its document text when `docs` has it), then
/// every document without a row (outcome `missing`).
pub fn page(title: &str, rows: &[Value], docs: &[Doc]) -> Page {
    let texts: HashMap<&str, &str> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    let mut fields: BTreeMap<String, usize> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut color = |f: String| -> usize {
        if let Some(&c) = fields.get(&f) {
            return c;
        }
        let c = order.len();
        fields.insert(f.clone(), c);
        order.push(f);
        c
    };
    let mut views = Vec::with_capacity(rows.len());
    let mut seen = std::collections::HashSet::new();
    for row in rows {
        let id = row["id"].as_str().unwrap_or_default().to_owned();
        seen.insert(id.clone());
        let text = texts.get(id.as_str()).copied();
        let mut values = Vec::new();
        if let (Some(text), Some(list)) = (text, row["evidence"].as_array()) {
            for ev in list {
                let (Some(start), Some(end)) = (
                    ev["start"].as_u64().map(|v| v as usize),
                    ev["end"].as_u64().map(|v| v as usize),
                ) else {
                    continue;
                };
                // Rows are input too: offsets outside the text or inside a char are dropped.
                if start >= end
                    || end > text.len()
                    || !text.is_char_boundary(start)
                    || !text.is_char_boundary(end)
                {
                    continue;
                }
                let path = ev["path"].as_str().unwrap_or_default().to_owned();
                values.push(ValueView {
                    color: color(field_of(&path)),
                    path,
                    value: ev["value"].clone(),
                    written: text[start..end].to_owned(),
                    grounded: ev["grounded"].as_bool().unwrap_or(false),
                    start,
                    end,
                });
            }
        }
        let segments = text.map(|t| segments(t, &values)).unwrap_or_default();
        let shown = if row["value"].is_null() {
            &row["json"]
        } else {
            &row["value"]
        };
        let not_in_source = row["not_in_source"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(|p| {
                        (
                            p.to_owned(),
                            shown.pointer(p).cloned().unwrap_or(Value::Null),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        views.push(DocView {
            id,
            outcome: row["outcome"].as_str().unwrap_or("invalid").to_owned(),
            retried: row["retried"].as_bool().unwrap_or(false),
            level: row["level"].as_str().unwrap_or("invalid").to_owned(),
            ms: row["ms"].as_f64(),
            attempts: row["attempts"].as_array().map_or(0, Vec::len),
            error: row["error"].as_str().map(str::to_owned),
            violations: row["violations"].as_array().cloned().unwrap_or_default(),
            earlier: row["attempts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .take(a.len().saturating_sub(1))
                        .map(|t| json!({"level": t["level"], "violations": t["violations"], "error": t["error"]}))
                        .collect()
                })
                .unwrap_or_default(),
            not_in_source,
            json: if shown.is_null() {
                String::new()
            } else {
                serde_json::to_string_pretty(shown).unwrap_or_default()
            },
            has_text: text.is_some(),
            segments,
            values,
        });
    }
    for d in docs {
        if !seen.contains(&d.id) {
            views.push(DocView {
                id: d.id.clone(),
                outcome: "missing".into(),
                retried: false,
                level: String::new(),
                ms: None,
                attempts: 0,
                error: Some("no row for this document".into()),
                violations: Vec::new(),
                earlier: Vec::new(),
                not_in_source: Vec::new(),
                json: String::new(),
                segments: vec![Segment(d.text.clone(), Vec::new())],
                has_text: true,
                values: Vec::new(),
            });
        }
    }
    Page {
        title: title.to_owned(),
        fields: order,
        docs: views,
    }
}

/// `text` cut at every evidence boundary of `values`, each piece with the values covering it.
pub fn segments(text: &str, values: &[ValueView]) -> Vec<Segment> {
    let mut cuts: Vec<usize> = vec![0, text.len()];
    for v in values {
        cuts.push(v.start);
        cuts.push(v.end);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Segment> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let covering: Vec<usize> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.start <= a && b <= v.end)
            .map(|(i, _)| i)
            .collect();
        match out.last_mut() {
            Some(last) if covering.is_empty() && last.1.is_empty() => last.0.push_str(&text[a..b]),
            _ => out.push(Segment(text[a..b].to_owned(), covering)),
        }
    }
    out
}

/// JSON safe inside `<script>`: `<`, `>`, `&` and the JavaScript line separators escaped.
pub fn script_json(value: &impl Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text escaped for HTML.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page.
pub fn html(page: &Page) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &page.docs {
        *counts.entry(d.outcome.as_str()).or_default() += 1;
    }
    let summary = counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    let meta = json!({"generator": "contract review"});
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"{gen}\">\n\
         <title>{title} review</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n\
         <header>\n<h1>{title} <small>review of {n} documents: {summary}</small></h1>\n\
         <div id=\"controls\">\n\
         <span class=\"group\" id=\"outcomes\"></span>\n\
         <label>level <select id=\"level\"><option value=\"\">any</option></select></label>\n\
         <label><input type=\"checkbox\" id=\"retried\"> retried only</label>\n\
         <label><input type=\"checkbox\" id=\"flagged\"> flagged only</label>\n\
         <label>id <input type=\"search\" id=\"search\" placeholder=\"filter ids\"></label>\n\
         <span id=\"pager\"></span>\n</div>\n<div id=\"legend\"></div>\n</header>\n\
         <main id=\"docs\"><noscript><p>The review page needs JavaScript to show the documents \
         (it runs locally and loads nothing).</p></noscript></main>\n\
         <script type=\"application/json\" id=\"data\">{data}</script>\n\
         <script>\n{JS}</script>\n</body>\n</html>\n",
        gen = escape_html(meta["generator"].as_str().unwrap_or_default()),
        title = escape_html(&page.title),
        n = page.docs.len(),
        summary = escape_html(&summary),
        data = script_json(page),
    )
}

const CSS: &str = r#"
:root { --fg: #1d2433; --muted: #667085; --line: #e4e7ec; --bg: #f8f9fb; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--line); padding: 10px 20px; }
h1 { font-size: 18px; margin: 0 0 6px; }
h1 small { font-weight: normal; color: var(--muted); font-size: 13px; }
#controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; font-size: 13px; }
#controls .group label { margin-right: 8px; }
#pager button { margin: 0 2px; }
#legend { margin-top: 6px; font-size: 12px; }
#legend span { display: inline-block; margin-right: 10px; padding: 0 6px; border-radius: 3px; }
main { padding: 16px 20px; display: grid; gap: 14px; }
article { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; }
article > h2 { grid-column: 1 / -1; font-size: 14px; margin: 0; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.badge { font-size: 11px; font-weight: 600; padding: 1px 8px; border-radius: 10px; background: #eef; }
.valid { background: #dcfae6; color: #085d3a; } .empty { background: #f2f4f7; color: #344054; }
.invalid { background: #fee4e2; color: #912018; } .error { background: #fef0c7; color: #93370d; }
.missing { background: #fbe8ff; color: #6f1877; } .meta { color: var(--muted); font-weight: normal; font-size: 12px; }
pre.text { white-space: pre-wrap; word-break: break-word; margin: 0; font: 13px/1.6 ui-monospace, SFMono-Regular, Menlo, monospace; max-height: 480px; overflow: auto; }
pre.json { margin: 0; font: 12px/1.5 ui-monospace, monospace; background: var(--bg); padding: 8px; border-radius: 6px; overflow: auto; max-height: 300px; }
mark { border-radius: 3px; padding: 0 1px; cursor: help; border-bottom: 2px solid rgba(0,0,0,.35); }
mark.nested { outline: 2px dashed rgba(0,0,0,.4); }
mark.loose { border-bottom: 2px dotted rgba(0,0,0,.35); }
ul.flags { margin: 6px 0 0; padding-left: 18px; font-size: 12px; }
ul.flags li.nis { color: #b54708; } ul.flags li.vio { color: #b42318; }
.side h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 8px 0 4px; }
.c0 { background: #fde68a; } .c1 { background: #bfdbfe; } .c2 { background: #bbf7d0; } .c3 { background: #fbcfe8; }
.c4 { background: #ddd6fe; } .c5 { background: #fed7aa; } .c6 { background: #a5f3fc; } .c7 { background: #d9f99d; }
.c8 { background: #fecaca; } .c9 { background: #e9d5ff; } .c10 { background: #c7d2fe; } .c11 { background: #99f6e4; }
"#;

const JS: &str = r#"
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  var PAGE = 50, page = 0, shown = [];
  var outcomes = ["valid", "empty", "invalid", "error", "missing"];
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function color(i) { return "c" + (i % 12); }
  var boxes = {};
  var og = document.getElementById("outcomes");
  outcomes.forEach(function (o) {
    var n = data.docs.filter(function (d) { return d.outcome === o; }).length;
    if (!n) return;
    var l = el("label"), b = el("input");
    b.type = "checkbox"; b.checked = true; b.addEventListener("change", apply);
    boxes[o] = b; l.appendChild(b); l.appendChild(el("span", "badge " + o, o + " " + n)); og.appendChild(l);
  });
  var levels = {};
  data.docs.forEach(function (d) { if (d.level) levels[d.level] = 1; });
  var sel = document.getElementById("level");
  Object.keys(levels).sort().forEach(function (lv) { var o = el("option", null, lv); o.value = lv; sel.appendChild(o); });
  var legend = document.getElementById("legend");
  data.fields.forEach(function (f, i) { legend.appendChild(el("span", color(i), f)); });
  if (data.fields.length) legend.appendChild(el("span", "meta", "solid underline: grounded in the schema; dotted: found in the text, not grounded; hover a value for its normalised form"));
  ["level", "retried", "flagged", "search"].forEach(function (id) {
    document.getElementById(id).addEventListener(id === "search" ? "input" : "change", apply);
  });
  function flagged(d) { return d.not_in_source.length > 0 || d.violations.length > 0; }
  function apply() {
    var lv = sel.value, rt = document.getElementById("retried").checked;
    var fl = document.getElementById("flagged").checked;
    var q = document.getElementById("search").value.toLowerCase();
    shown = data.docs.filter(function (d) {
      return (!boxes[d.outcome] || boxes[d.outcome].checked) && (!lv || d.level === lv) &&
        (!rt || d.retried) && (!fl || flagged(d)) && (!q || d.id.toLowerCase().indexOf(q) >= 0);
    });
    page = 0; render();
  }
  function pager() {
    var p = document.getElementById("pager"), pages = Math.max(1, Math.ceil(shown.length / PAGE));
    p.textContent = "";
    var prev = el("button", null, "\u2039 prev"), next = el("button", null, "next \u203a");
    prev.disabled = page === 0; next.disabled = page >= pages - 1;
    prev.addEventListener("click", function () { page--; render(); });
    next.addEventListener("click", function () { page++; render(); });
    p.appendChild(prev);
    p.appendChild(el("span", null, " page " + (page + 1) + " of " + pages + " (" + shown.length + " documents) "));
    p.appendChild(next);
  }
  function doc(d) {
    var a = el("article"); a.id = "doc-" + d.id;
    var h = el("h2");
    h.appendChild(el("span", null, d.id));
    h.appendChild(el("span", "badge " + d.outcome, d.outcome));
    if (d.retried) h.appendChild(el("span", "badge", "retried"));
    if (d.level) h.appendChild(el("span", "meta", "level " + d.level));
    if (d.attempts) h.appendChild(el("span", "meta", d.attempts + (d.attempts === 1 ? " attempt" : " attempts")));
    if (d.ms !== null && d.ms !== undefined) h.appendChild(el("span", "meta", (d.ms / 1000).toFixed(2) + " s"));
    a.appendChild(h);
    var pre = el("pre", "text");
    if (!d.has_text) pre.appendChild(el("em", null, "(the document is not in --docs)"));
    d.segments.forEach(function (s) {
      if (!s[1].length) { pre.appendChild(document.createTextNode(s[0])); return; }
      var v = d.values[s[1][s[1].length - 1]];
      var m = el("mark", color(v.color) + (s[1].length > 1 ? " nested" : "") + (v.grounded ? "" : " loose"), s[0]);
      m.title = s[1].map(function (i) {
        var x = d.values[i];
        return x.path + " = " + JSON.stringify(x.value) + "\nwritten: " + x.written + (x.grounded ? "\n(grounded)" : "");
      }).join("\n\n");
      m.setAttribute("data-path", v.path);
      pre.appendChild(m);
    });
    a.appendChild(pre);
    var side = el("div", "side");
    if (d.error) { side.appendChild(el("h3", null, "reason")); side.appendChild(el("div", null, d.error)); }
    var flags = el("ul", "flags");
    d.not_in_source.forEach(function (n) {
      flags.appendChild(el("li", "nis", "\u26a0 not in the document: " + n[0] + " = " + JSON.stringify(n[1])));
    });
    d.violations.forEach(function (v) {
      flags.appendChild(el("li", "vio", "\u2716 " + (v.path || "/") + ": " + v.message + " (" + v.kind + ")"));
    });
    if (flags.childNodes.length) { side.appendChild(el("h3", null, "flags")); side.appendChild(flags); }
    if (d.earlier.length) {
      side.appendChild(el("h3", null, "earlier attempts"));
      var ea = el("ul", "flags");
      d.earlier.forEach(function (t, i) {
        var what = t.error ? String(t.error) : (t.violations || []).map(function (v) {
          return (v.path || "/") + ": " + v.message + " (" + v.kind + ")";
        }).join("; ");
        ea.appendChild(el("li", "vio", "attempt " + (i + 1) + (t.level ? " (" + t.level + ")" : "") + ": " + what));
      });
      side.appendChild(ea);
    }
    if (d.json) { side.appendChild(el("h3", null, d.outcome === "invalid" ? "reply" : "value")); side.appendChild(el("pre", "json", d.json)); }
    a.appendChild(side);
    return a;
  }
  function render() {
    var main = document.getElementById("docs");
    main.textContent = "";
    shown.slice(page * PAGE, page * PAGE + PAGE).forEach(function (d) { main.appendChild(doc(d)); });
    pager();
    window.scrollTo(0, 0);
  }
  apply();
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_close_the_script() {
        let s = script_json(&json!({"t": "</script><img src=x onerror=alert(1)>&\u{2028}"}));
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        let back: Value = serde_json::from_str(&s).unwrap_or_default();
        assert_eq!(back["t"], "</script><img src=x onerror=alert(1)>&\u{2028}");
    }

    #[test]
    fn segments_cover_the_text_and_nest() {
        let text = "ab Acme Corp 12 z";
        let v = |s: usize, e: usize| ValueView {
            path: "/x".into(),
            color: 0,
            value: Value::Null,
            written: text[s..e].to_owned(),
            grounded: true,
            start: s,
            end: e,
        };
        let segs = segments(text, &[v(3, 12), v(8, 12)]);
        let joined: String = segs.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(joined, text);
        let got: Vec<(&str, Vec<usize>)> =
            segs.iter().map(|s| (s.0.as_str(), s.1.clone())).collect();
        assert_eq!(
            got,
            [
                ("ab ", vec![]),
                ("Acme ", vec![0]),
                ("Corp", vec![0, 1]),
                (" 12 z", vec![])
            ]
        );
    }
}
