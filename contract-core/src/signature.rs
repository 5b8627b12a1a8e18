//! The one-line signature a model reads, written from the IR ([`crate::ir`]) of a derived
//! contract or of a runtime schema ([`crate::DynContract::signature`]).
//!
//! ```text
//! {"quarter": integer 1-4 | null, "low": number > 0 (USD millions) | null} where low <= high
//! ```
//!
//! Every field with its type, constraints and unit; nested contracts inline (a contract already
//! being written out is named instead, so recursive contracts end); enums as `"USD" | "EUR"`;
//! cross-field rules after `where`, with JSON names. A runtime schema also has optional keys
//! (`"key"?`), other keys (`...: type`, `/pattern/: type`), alternatives (` | `) and
//! intersections (` & `); a long definition used more than once is named and defined after the
//! root (`; Name = ..`) when writing everything inline would be longer than the schema itself.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::attrs::{Grounding, Rule};
use crate::bounds::{len_words, show, NumberBounds};
use crate::ir::{ContractSpec, ExternalRef};
use crate::ir::{Document, JsonType, Node, Ref, Target};

/// A definition used more than once is written inline only up to this many characters;
/// longer, it is named and written once after the root.
const INLINE_MAX: usize = 120;
/// Deepest nesting written out; below it, `...`.
const MAX_DEPTH: usize = 64;

/// `{"quarter": integer 1-4 | null, ...}` for a derived contract, followed by ` where ` and its
/// rules; nested contracts are always written inline.
pub fn signature(spec: &ContractSpec) -> String {
    let mut w = Writer::new(None, spec.node(), &spec.name, Inline::Always);
    w.root_signature()
}

/// The signature of a runtime schema document: every definition inline, as a derived signature
/// writes nested contracts, unless that is longer than the schema itself; then long definitions
/// used more than once are named instead.
pub(crate) fn document_signature(doc: &Document) -> String {
    let budget = doc.source_len;
    let mut w = Writer::new(Some(doc), doc.root(), &doc.name, Inline::Budget(budget));
    let out = w.root_signature();
    if !w.over_budget && out.chars().count() <= budget {
        return out;
    }
    Writer::new(Some(doc), doc.root(), &doc.name, Inline::Shared).root_signature()
}

/// The rules of an object in words (`low <= high; low, high both null or both set`).
pub(crate) fn rules_words(rules: &[Rule]) -> Option<String> {
    if rules.is_empty() {
        return None;
    }
    Some(rules.iter().map(rule_words).collect::<Vec<_>>().join("; "))
}

/// One rule in words.
pub(crate) fn rule_words(rule: &Rule) -> String {
    match rule {
        Rule::Compare { .. } => rule.to_string(),
        Rule::BothOrNeither(fields) if fields.len() == 2 => {
            format!("{} both null or both set", fields.join(", "))
        }
        Rule::BothOrNeither(fields) => format!("{} all null or all set", fields.join(", ")),
        Rule::AtLeastOne(fields) => format!("at least one of {} set", fields.join(", ")),
    }
}

/// What the signature says of a grounded value, so the model knows it copies
/// (`copied from the document`, `copied from "quote"`); nothing for
/// [`Grounding::WithContainer`], whose container's field says it.
pub(crate) fn grounding_note(grounded: &Grounding) -> Option<String> {
    Some(match grounded {
        Grounding::Source => "copied from the document".into(),
        Grounding::Line => "a whole line copied from the document".into(),
        Grounding::In(field) => format!("copied from {}", quote(field)),
        Grounding::Lines { .. } => "copied from its lines".into(),
        Grounding::WithContainer => return None,
    })
}

/// A format in words (`date YYYY-MM-DD`).
pub(crate) fn format_words(format: &str) -> String {
    match format {
        "date" => "date YYYY-MM-DD".into(),
        "date-time" => "date-time YYYY-MM-DDThh:mm:ssZ".into(),
        "time" => "time hh:mm:ss".into(),
        other => other.into(),
    }
}

/// A compact rendering of an external (schemars) type: `string (ipv4)`, `{"a": integer}`.
pub(crate) fn external_words(r: &ExternalRef) -> String {
    let schema = r.standalone_schema();
    let defs = schema.get("$defs").and_then(Value::as_object).cloned();
    external(&schema, defs.as_ref(), &mut Vec::new())
}

/// How definitions are written.
#[derive(Clone, Copy)]
enum Inline {
    /// Always inline (a derived contract's nested contracts).
    Always,
    /// Inline until the text passes this many characters.
    Budget(usize),
    /// Inline, except long definitions used more than once.
    Shared,
}

type Key = *const Node;

pub(crate) struct Writer<'a> {
    doc: Option<&'a Document>,
    root: &'a Node,
    /// How many references point at each target.
    counts: HashMap<Key, usize>,
    names: HashMap<Key, String>,
    used_names: HashSet<String>,
    /// Targets being written out (a reference to one of them is written as its name).
    stack: Vec<Key>,
    /// Renderings of reference targets.
    cache: HashMap<Key, String>,
    /// Targets written as names, defined after the root.
    defs: Vec<Key>,
    depth: usize,
    inline: Inline,
    spent: usize,
    over_budget: bool,
}

impl<'a> Writer<'a> {
    fn new(doc: Option<&'a Document>, root: &'a Node, root_name: &str, inline: Inline) -> Self {
        let key = root as Key;
        let mut w = Writer {
            doc,
            root,
            counts: HashMap::new(),
            names: HashMap::new(),
            used_names: HashSet::new(),
            stack: vec![key],
            cache: HashMap::new(),
            defs: Vec::new(),
            depth: 0,
            inline,
            spent: 0,
            over_budget: false,
        };
        w.names.insert(key, root_name.to_owned());
        w.used_names.insert(root_name.to_owned());
        if matches!(inline, Inline::Shared) {
            if let Some(doc) = doc {
                for node in &doc.nodes {
                    node.walk(&mut |n| {
                        if let Some(target) = n.reference.as_ref().and_then(|r| doc.resolve(r)) {
                            *w.counts.entry(target as Key).or_default() += 1;
                        }
                    });
                }
            }
        }
        w
    }

    /// A writer for pieces of a document (the docs' `Value` lines).
    pub(crate) fn for_pieces(doc: Option<&'a Document>, root: &'a Node, root_name: &str) -> Self {
        Writer::new(doc, root, root_name, Inline::Shared)
    }

    fn resolve(&self, r: &Ref) -> Option<&'a Node> {
        match r.target.as_ref()? {
            Target::Def(i) => self.doc?.nodes.get(*i),
            Target::Contract(c) => Some(c.spec().node()),
        }
    }

    /// The root in words, its rules after `where`, then the named definitions.
    fn root_signature(&mut self) -> String {
        let root = self.root;
        let mut out = self.value(root);
        if let Some(rules) = root.object.as_deref().and_then(|o| rules_words(&o.rules)) {
            out.push_str(" where ");
            out.push_str(&rules);
        }
        let mut i = 0;
        while i < self.defs.len() {
            let key = self.defs[i];
            let name = self.names.get(&key).cloned().unwrap_or_default();
            let body = self.cache.get(&key).cloned().unwrap_or_default();
            out.push_str(&format!("; {name} = {body}"));
            i += 1;
        }
        out
    }

    /// The name a reference target is written as.
    fn name_for(&mut self, key: Key, reference: &str) -> String {
        if let Some(name) = self.names.get(&key) {
            return name.clone();
        }
        let name = fresh_name(&ref_name(reference), &mut self.used_names);
        self.names.insert(key, name.clone());
        name
    }

    /// A node in words.
    pub(crate) fn value(&mut self, node: &'a Node) -> String {
        if self.depth >= MAX_DEPTH {
            return "...".into();
        }
        self.depth += 1;
        let out = self.value_inner(node);
        self.depth -= 1;
        out
    }

    fn value_inner(&mut self, node: &'a Node) -> String {
        let (out, unit_written) = self.value_words(node);
        let mut notes = Vec::new();
        if !unit_written {
            notes.extend(node.unit.as_ref().map(|u| format!("({u})")));
        }
        notes.extend(node.grounded.as_ref().and_then(grounding_note));
        if notes.is_empty() {
            return out;
        }
        // As a derived field reads: after the type and unit, before `| null`.
        let notes = notes.join(" ");
        match out.strip_suffix(" | null") {
            Some(head) => format!("{head} {notes} | null"),
            None => format!("{out} {notes}"),
        }
    }

    /// The words, and whether they already say the unit.
    fn value_words(&mut self, node: &'a Node) -> (String, bool) {
        match node.boolean {
            Some(false) => return ("never".into(), false),
            Some(true) => return ("any".into(), false),
            None => {}
        }
        if let Some(r) = &node.external {
            let mut out = external_words(r);
            if node.is_nullable() && !out.ends_with(" | null") {
                out.push_str(" | null");
            }
            return (out, false);
        }
        let mut parts: Vec<String> = Vec::new();
        let mut unit_written = false;
        if let Some(view) = ObjectView::of(self, node) {
            parts.push(self.object(&view, node));
        } else {
            if let Some(r) = &node.reference {
                parts.push(self.reference(r));
            }
            if let Some(r) = &node.dynamic_reference {
                parts.push(ref_name(r));
            }
            if let Some(own) = self.own(node) {
                unit_written = node.unit.is_some() && !own.is_empty() && own != "null";
                parts.push(own);
            }
            if let Some(all) = &node.all_of {
                for part in all {
                    parts.push(self.value(part));
                }
            }
        }
        for branches in [&node.any_of, &node.one_of].into_iter().flatten() {
            let words: Vec<String> = branches.iter().map(|b| self.value(b)).collect();
            let joined = dedup(words).join(" | ");
            if parts.is_empty() {
                parts.push(joined);
            } else {
                parts.push(format!("({joined})"));
            }
        }
        let out = match parts.len() {
            0 => "any".into(),
            1 => parts.pop().unwrap_or_default(),
            _ => parts
                .into_iter()
                .map(|p| {
                    if p.contains(" | ") && !p.starts_with('(') {
                        format!("({p})")
                    } else {
                        p
                    }
                })
                .collect::<Vec<_>>()
                .join(" & "),
        };
        (out, unit_written)
    }

    /// A `$ref`: the target inline, or its name (recursion, or a long definition used twice).
    fn reference(&mut self, r: &Ref) -> String {
        let Some(target) = self.resolve(r) else {
            return ref_name(&r.text());
        };
        let key = target as Key;
        if self.stack.contains(&key) || self.defs.contains(&key) {
            return self.name_for(key, &r.text());
        }
        let body = match self.cache.get(&key) {
            Some(body) => body.clone(),
            None => {
                self.name_for(key, &r.text());
                self.stack.push(key);
                let body = self.value(target);
                self.stack.pop();
                self.cache.insert(key, body.clone());
                body
            }
        };
        match self.inline {
            Inline::Always => body,
            Inline::Budget(budget) => {
                self.spent += body.len();
                if self.spent > budget {
                    self.over_budget = true;
                    return self.name_for(key, &r.text());
                }
                body
            }
            Inline::Shared => {
                if self.counts.get(&key).copied().unwrap_or(0) > 1
                    && body.chars().count() > INLINE_MAX
                {
                    self.defs.push(key);
                    return self.name_for(key, &r.text());
                }
                body
            }
        }
    }

    /// The node's own type (from `type`, `enum`, `const` or the keywords it has), with unit and
    /// `| null`; `None` when it says nothing about the type.
    fn own(&mut self, node: &'a Node) -> Option<String> {
        let (words, nullable) = if let Some(c) = &node.constant {
            (vec![json(c)], false)
        } else if let Some(values) = &node.enumeration {
            let words: Vec<String> = values.iter().filter(|v| !v.is_null()).map(json).collect();
            (words, values.iter().any(|v| v.is_null()))
        } else {
            let (types, nullable) = types_of(node)?;
            let words = types.iter().map(|t| self.type_words(*t, node)).collect();
            (words, nullable)
        };
        let mut out = words.join(" | ");
        if let Some(unit) = &node.unit {
            if !out.is_empty() {
                out.push_str(&format!(" ({unit})"));
            }
        }
        if nullable {
            if out.is_empty() {
                out.push_str("null");
            } else {
                out.push_str(" | null");
            }
        }
        Some(out)
    }

    /// One JSON type of `node` with the keywords that apply to it.
    fn type_words(&mut self, t: JsonType, node: &'a Node) -> String {
        match t {
            JsonType::Integer => {
                let mut out = match integer_words(node) {
                    Some(range) => format!("integer {range}"),
                    None => "integer".into(),
                };
                push_notes(&mut out, multiple_of(node).into_iter().collect());
                out
            }
            JsonType::Number => {
                let mut out = match node.number.bounds.number_words() {
                    Some(range) => format!("number {range}"),
                    None => "number".into(),
                };
                push_notes(&mut out, multiple_of(node).into_iter().collect());
                out
            }
            JsonType::String => {
                let mut out = String::from("string");
                if let Some(p) = &node.string.pattern {
                    out.push_str(&format!(" /{}/", p.as_str()));
                }
                push_notes(&mut out, string_notes(node));
                out
            }
            JsonType::Array => {
                let mut out = self.array(node);
                let mut notes = Vec::new();
                if let Some(a) = node.array.as_deref() {
                    if let Some(len) = len_words(a.min_items, a.max_items) {
                        notes.push(format!("{len} items"));
                    }
                    if a.unique_items {
                        notes.push("unique".into());
                    }
                }
                push_notes(&mut out, notes);
                out
            }
            // Only reached for an object without properties of any kind.
            JsonType::Object => "object".into(),
            other => other.as_str().into(),
        }
    }

    fn array(&mut self, node: &'a Node) -> String {
        let Some(a) = node.array.as_deref() else {
            return "[...]".into();
        };
        match &a.prefix_items {
            None => match &a.items {
                Some(items) => format!("[{}, ...]", self.value(items)),
                None => "[...]".into(),
            },
            Some(prefix) => {
                let mut words: Vec<String> = prefix.iter().map(|s| self.value(s)).collect();
                match &a.items {
                    Some(items) if items.boolean == Some(false) => {}
                    Some(items) => words.push(format!("{}, ...", self.value(items))),
                    None => words.push("...".into()),
                }
                format!("[{}]", words.join(", "))
            }
        }
    }

    /// An object (with its merged `allOf` parts): `{"a": integer, "b"?: string, ...: number}`.
    fn object(&mut self, view: &ObjectView<'a>, node: &'a Node) -> String {
        let mut fields: Vec<String> = Vec::new();
        for &(name, property) in &view.properties {
            let optional = if view.required.contains(&name) {
                ""
            } else {
                "?"
            };
            let words = self.value(property);
            fields.push(format!("{}{optional}: {words}", quote(name)));
        }
        for &(pattern, property) in &view.patterns {
            let words = self.value(property);
            fields.push(format!("/{pattern}/: {words}"));
        }
        if let Some(extra) = view.additional {
            if extra.boolean.is_none() {
                let words = self.value(extra);
                fields.push(format!("...: {words}"));
            }
        }
        let mut out = if fields.is_empty() {
            "object".to_owned()
        } else {
            format!("{{{}", fields.join(", "))
        };
        if !fields.is_empty() {
            if !std::ptr::eq(node, self.root) && !view.rules.is_empty() {
                out.push_str(" where ");
                out.push_str(&view.rules.join("; "));
            }
            out.push('}');
        }
        if view.nullable {
            out.push_str(" | null");
        }
        out
    }
}

/// An object node with its `allOf` parts (and the `$ref`s among them) merged: properties in
/// order of appearance, the first definition of a key winning.
pub(crate) struct ObjectView<'a> {
    pub properties: Vec<(&'a str, &'a Node)>,
    pub required: Vec<&'a str>,
    pub patterns: Vec<(&'a str, &'a Node)>,
    pub additional: Option<&'a Node>,
    /// The cross-field rules in words.
    pub rules: Vec<String>,
    /// The parts' rules.
    pub rule_list: Vec<&'a Rule>,
    pub nullable: bool,
}

impl<'a> ObjectView<'a> {
    /// The view of `node` when it is an object schema whose `allOf` parts are objects too (or
    /// absent); `None` otherwise.
    pub(crate) fn of(w: &Writer<'a>, node: &'a Node) -> Option<Self> {
        ObjectView::with(&|r| w.resolve(r), node)
    }

    /// [`ObjectView::of`] with references followed by `resolve`.
    pub(crate) fn with(resolve: &dyn Fn(&Ref) -> Option<&'a Node>, node: &'a Node) -> Option<Self> {
        let (types, nullable) = types_of(node).unwrap_or_default();
        if !(types == [JsonType::Object]
            || types.is_empty() && is_object_like(node)
            || types.is_empty() && node.all_of.is_some())
        {
            return None;
        }
        if node.enumeration.is_some() || node.constant.is_some() {
            return None;
        }
        let mut parts: Vec<&'a Node> = Vec::new();
        let mut seen: Vec<Key> = Vec::new();
        if !collect_parts(resolve, node, &mut parts, &mut seen, 0) {
            return None;
        }
        if !parts.iter().any(|p| is_object_like(p)) {
            return None;
        }
        let mut view = ObjectView {
            properties: Vec::new(),
            required: Vec::new(),
            patterns: Vec::new(),
            additional: None,
            rules: Vec::new(),
            rule_list: Vec::new(),
            nullable,
        };
        for part in parts {
            let Some(object) = part.object.as_deref() else {
                continue;
            };
            for field in &object.properties {
                if !view.properties.iter().any(|(n, _)| *n == field.name) {
                    view.properties.push((&field.name, &field.node));
                }
            }
            for name in &object.required {
                if !view.required.contains(&name.as_str()) {
                    view.required.push(name);
                }
            }
            view.patterns.extend(
                object
                    .pattern_properties
                    .iter()
                    .map(|(p, s)| (p.as_str(), s)),
            );
            if view.additional.is_none() {
                view.additional = object.additional_properties.as_deref();
            }
            if let Some(rules) = rules_words(&object.rules) {
                view.rules.push(rules);
            }
            view.rule_list.extend(object.rules.iter());
        }
        Some(view)
    }
}

/// Gathers `node` and its `allOf` parts (through `$ref`s); `false` when a part is not an object
/// schema (then the parts are written joined by `&`).
fn collect_parts<'a>(
    resolve: &dyn Fn(&Ref) -> Option<&'a Node>,
    node: &'a Node,
    parts: &mut Vec<&'a Node>,
    seen: &mut Vec<Key>,
    depth: usize,
) -> bool {
    if depth > 16 || seen.contains(&(node as Key)) {
        return true;
    }
    seen.push(node);
    parts.push(node);
    if depth > 0
        && (node.any_of.is_some()
            || node.one_of.is_some()
            || node.dynamic_reference.is_some()
            || node.other.iter().any(|(k, _)| k == "not" || k == "if"))
    {
        return false;
    }
    if depth > 0 {
        if let Some((types, _)) = types_of(node) {
            if types != [JsonType::Object] {
                return false;
            }
        }
    }
    if let Some(r) = &node.reference {
        match resolve(r) {
            Some(target) if target.boolean.is_none() => {
                if !collect_parts(resolve, target, parts, seen, depth + 1) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    if let Some(all) = &node.all_of {
        for part in all {
            match part.boolean {
                None => {
                    if !collect_parts(resolve, part, parts, seen, depth + 1) {
                        return false;
                    }
                }
                Some(true) => {}
                Some(false) => return false,
            }
        }
    }
    true
}

/// Whether the node has object keywords.
pub(crate) fn is_object_like(node: &Node) -> bool {
    node.object.as_deref().is_some_and(|o| o.has_shape)
}

/// The JSON types a node allows (without `null`), and whether it allows `null`; from `type`,
/// else from the keywords it has. `None` when it says nothing about the type.
pub(crate) fn types_of(node: &Node) -> Option<(Vec<JsonType>, bool)> {
    let listed: Vec<JsonType> = if node.types.is_empty() {
        let mut inferred = Vec::new();
        if is_object_like(node) {
            inferred.push(JsonType::Object);
        }
        if node.array.as_deref().is_some_and(|a| {
            a.items.is_some()
                || a.prefix_items.is_some()
                || a.min_items.is_some()
                || a.max_items.is_some()
        }) {
            inferred.push(JsonType::Array);
        }
        let s = &node.string;
        if s.min_length.is_some()
            || s.max_length.is_some()
            || s.pattern.is_some()
            || s.format.is_some()
        {
            inferred.push(JsonType::String);
        }
        if !node.number.is_unbounded() || node.number.multiple_of.is_some() {
            inferred.push(JsonType::Number);
        }
        inferred
    } else {
        node.types.clone()
    };
    if listed.is_empty() {
        return None;
    }
    let nullable = listed.contains(&JsonType::Null);
    let mut types: Vec<JsonType> = listed
        .into_iter()
        .filter(|t| *t != JsonType::Null)
        .collect();
    // `integer` is a `number`: say it once.
    if types.contains(&JsonType::Number) {
        types.retain(|t| *t != JsonType::Integer);
    }
    types.dedup();
    Some((types, nullable))
}

/// An integer's range in words (`1-4`, `>= 0`). For a derived integer, a bound that is only the
/// Rust type's own bound of a 32-bit or wider type is left out as noise; for a schema's, any
/// bound of 2^31 - 1 or more in size (most likely such a type's bound, written out).
pub(crate) fn integer_words(node: &Node) -> Option<String> {
    let c = &node.number.bounds;
    if let Some((min, max)) = node.number.integer_type {
        return c.integer_words(min, max);
    }
    const WIDE: f64 = i32::MAX as f64;
    let narrow = |n: &Option<serde_json::Number>| {
        n.clone()
            .filter(|n| n.as_f64().is_some_and(|f| f.abs() < WIDE))
    };
    let c = NumberBounds {
        minimum: narrow(&c.minimum),
        maximum: narrow(&c.maximum),
        exclusive_minimum: narrow(&c.exclusive_minimum),
        exclusive_maximum: narrow(&c.exclusive_maximum),
    };
    c.integer_words(i128::from(i64::MIN), i128::from(u64::MAX))
}

/// `multiple of 5`.
pub(crate) fn multiple_of(node: &Node) -> Option<String> {
    node.number
        .multiple_of
        .as_ref()
        .map(|n| format!("multiple of {}", show(n)))
}

/// `date YYYY-MM-DD`, `1-80 chars`.
pub(crate) fn string_notes(node: &Node) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(f) = &node.string.format {
        notes.push(format_words(f));
    }
    if let Some(len) = len_words(node.string.min_length, node.string.max_length) {
        notes.push(format!("{len} chars"));
    }
    notes
}

fn push_notes(out: &mut String, notes: Vec<String>) {
    if !notes.is_empty() {
        out.push_str(&format!(" ({})", notes.join(", ")));
    }
}

/// `base`, or `base2`, `base3`, .. when taken; recorded in `used`.
pub(crate) fn fresh_name(base: &str, used: &mut HashSet<String>) -> String {
    let mut name = base.to_owned();
    let mut n = 2;
    while used.contains(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    used.insert(name.clone());
    name
}

/// A short name for what `reference` points at: its last segment (`#/$defs/Amount` → `Amount`).
pub(crate) fn ref_name(reference: &str) -> String {
    let tail = reference
        .rsplit(['/', '#'])
        .find(|s| !s.is_empty())
        .unwrap_or(reference);
    let decoded = crate::schema::pointer::decode_ref(&format!("#/{tail}"))
        .and_then(|mut v| v.pop())
        .unwrap_or_else(|| tail.to_owned());
    let decoded = decoded.trim_end_matches(".json");
    if decoded.is_empty() {
        "Root".to_owned()
    } else {
        decoded.to_owned()
    }
}

pub(crate) fn json(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

pub(crate) fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn dedup(words: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for w in words {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// A compact rendering of a schemars type's schema: type names, enums, inline objects.
fn external(schema: &Value, defs: Option<&Map<String, Value>>, stack: &mut Vec<String>) -> String {
    let Value::Object(map) = schema else {
        return match schema {
            Value::Bool(false) => "never".into(),
            _ => "any".into(),
        };
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        if stack.contains(&name) {
            return name;
        }
        let Some(target) = defs.and_then(|d| d.get(&name)) else {
            return name;
        };
        stack.push(name);
        let out = external(target, defs, stack);
        stack.pop();
        return out;
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = map.get("const") {
        return serde_json::to_string(value).unwrap_or_default();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            return branches
                .iter()
                .map(|b| external(b, defs, stack))
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        return "any".into();
    }
    types
        .iter()
        .map(|t| match *t {
            "object" => match map.get("properties") {
                Some(Value::Object(properties)) => {
                    let fields: Vec<String> = properties
                        .iter()
                        .map(|(k, v)| format!("{}: {}", quote(k), external(v, defs, stack)))
                        .collect();
                    format!("{{{}}}", fields.join(", "))
                }
                _ => "object".into(),
            },
            "array" => match map.get("items") {
                Some(items) => format!("[{}, ...]", external(items, defs, stack)),
                None => "[...]".into(),
            },
            "string" => match map.get("format").and_then(Value::as_str) {
                Some(f) => format!("string ({})", format_words(f)),
                None => "string".into(),
            },
            other => other.into(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::FieldAttrs;
    use crate::ir::TypeSpec;
    use crate::schema::fixtures::Node;
    use crate::schema::fixtures::*;
    use crate::Contract;

    const GUIDANCE: &str = "{\"quarter\": integer 1-4 | null, \"year\": integer 2018-2030 | null, \
        \"low\": number > 0 (USD millions) | null, \"high\": number > 0 (USD millions) | null} \
        where low <= high; low, high both null or both set";

    #[test]
    fn guidance() {
        assert_eq!(Guidance::signature(), GUIDANCE);
        assert_eq!(signature(Guidance::contract_spec()), GUIDANCE);
    }

    #[test]
    fn guidance_is_at_most_40_percent_of_the_schema() {
        let schema = serde_json::to_string(&<Guidance as Contract>::json_schema()).unwrap();
        let signature = Guidance::signature();
        assert!(
            signature.len() * 100 <= schema.len() * 40,
            "signature {} chars, schema {} chars",
            signature.len(),
            schema.len()
        );
    }

    #[test]
    fn every_shape() {
        assert_eq!(
            Policy::signature(),
            concat!(
                r#"{"name": string (1-80 chars), "#,
                r#""insured": {"value": number, "currency": "USD" | "EUR", "unit": string (1-20 chars) | null}, "#,
                r#""deductible": {"value": number, "currency": "USD" | "EUR", "unit": string (1-20 chars) | null} | null, "#,
                r#""start": string (date YYYY-MM-DD), "tags": [string /^[a-z]+$/, ...] (1-5 items), "#,
                r#""code": "A" | "B" | null, "count": integer >= 0, "ratio": number 0-1 (share), "#,
                r#""level": integer -128 to 9, "active": boolean, "scores": [integer 0-100, ...] (<= 3 items) | null, "#,
                r#""server": string (ipv4), "currencies": ["USD" | "EUR", ...]} "#,
                "where at least one of code, scores set"
            )
        );
        assert_eq!(Currency::signature(), r#""USD" | "EUR""#);
    }

    #[test]
    fn recursion_ends_at_the_name() {
        assert_eq!(
            Node::signature(),
            r#"{"name": string, "children": [Node, ...], "parent": Node | null}"#
        );
        assert_eq!(
            Tree::signature(),
            r#"{"root": {"name": string, "children": [Node, ...], "parent": Node | null}}"#
        );
    }

    /// A field type with its attributes in words, as a field of that type reads.
    fn ty_words(ty: &TypeSpec, c: &FieldAttrs, _: &mut Vec<String>) -> String {
        let node = crate::ir::Node::field(ty, c, None, None);
        Writer::new(None, &node, "Root", Inline::Always).value(&node)
    }

    #[test]
    fn bounds_in_words() {
        use crate::__private::{float, int};
        use crate::attrs::FieldAttrs;
        let c =
            |min: Option<f64>, xmin: Option<f64>, max: Option<f64>, xmax: Option<f64>| FieldAttrs {
                bounds: NumberBounds {
                    minimum: min.map(float),
                    exclusive_minimum: xmin.map(float),
                    maximum: max.map(float),
                    exclusive_maximum: xmax.map(float),
                },
                ..FieldAttrs::default()
            };
        let num = |c: &FieldAttrs| ty_words(&TypeSpec::Number, c, &mut Vec::new());
        assert_eq!(num(&c(None, None, None, None)), "number");
        assert_eq!(num(&c(Some(0.0), None, Some(1.0), None)), "number 0-1");
        assert_eq!(num(&c(None, Some(0.0), None, None)), "number > 0");
        assert_eq!(num(&c(None, None, None, Some(5.5))), "number < 5.5");
        assert_eq!(num(&c(Some(0.25), None, None, None)), "number >= 0.25");
        assert_eq!(
            num(&c(None, Some(0.0), Some(1.0), None)),
            "number > 0, <= 1"
        );
        assert_eq!(num(&c(Some(-1.0), None, Some(1.0), None)), "number -1 to 1");
        let int_ty = |min: i128, max: i128| TypeSpec::Integer { min, max };
        let words = |t: &TypeSpec, c: &FieldAttrs| ty_words(t, c, &mut Vec::new());
        let none = FieldAttrs::default();
        assert_eq!(words(&int_ty(0, 255), &none), "integer 0-255");
        assert_eq!(
            words(&int_ty(i64::MIN.into(), i64::MAX.into()), &none),
            "integer"
        );
        assert_eq!(words(&int_ty(0, u64::MAX.into()), &none), "integer >= 0");
        let min1 = FieldAttrs {
            bounds: NumberBounds {
                minimum: Some(int(1)),
                ..NumberBounds::default()
            },
            ..FieldAttrs::default()
        };
        assert_eq!(words(&int_ty(0, u64::MAX.into()), &min1), "integer >= 1");
        let xmax = FieldAttrs {
            bounds: NumberBounds {
                exclusive_maximum: Some(float(2.5)),
                ..NumberBounds::default()
            },
            ..FieldAttrs::default()
        };
        assert_eq!(
            words(&int_ty(i32::MIN.into(), i32::MAX.into()), &xmax),
            "integer <= 2"
        );
        let exact = FieldAttrs {
            bounds: NumberBounds {
                minimum: Some(int(3)),
                maximum: Some(int(3)),
                ..NumberBounds::default()
            },
            ..FieldAttrs::default()
        };
        assert_eq!(words(&int_ty(0, 255), &exact), "integer = 3");
    }

    #[test]
    fn strings_in_words() {
        use crate::__private::{format, pattern};
        use crate::attrs::FieldAttrs;
        let words = |c: FieldAttrs| ty_words(&TypeSpec::String, &c, &mut Vec::new());
        assert_eq!(
            words(FieldAttrs {
                pattern: Some(pattern("^[A-Z]{3}$")),
                ..FieldAttrs::default()
            }),
            "string /^[A-Z]{3}$/"
        );
        assert_eq!(
            words(FieldAttrs {
                format: Some(format("date-time")),
                min_len: Some(20),
                ..FieldAttrs::default()
            }),
            "string (date-time YYYY-MM-DDThh:mm:ssZ, 20+ chars)"
        );
        assert_eq!(
            words(FieldAttrs {
                min_len: Some(3),
                max_len: Some(3),
                ..FieldAttrs::default()
            }),
            "string (3 chars)"
        );
        assert_eq!(
            words(FieldAttrs {
                max_len: Some(80),
                ..FieldAttrs::default()
            }),
            "string (<= 80 chars)"
        );
    }

    #[test]
    fn external_types() {
        let words = |r: ExternalRef| external_words(&r);
        assert_eq!(
            words(ExternalRef::of::<std::net::Ipv4Addr>()),
            "string (ipv4)"
        );
        assert_eq!(words(ExternalRef::of::<Vec<bool>>()), "[boolean, ...]");
        assert_eq!(words(ExternalRef::of::<Option<String>>()), "string | null");
        assert_eq!(
            words(ExternalRef::of::<std::collections::BTreeMap<String, i32>>()),
            "object"
        );
    }
}
