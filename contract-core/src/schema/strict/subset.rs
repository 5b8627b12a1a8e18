//! Which provider's strict subset a schema is converted into ([`Subset`]), and the `format`
//! values each accepts: read by the walk (`strict`) and by the words for what it refuses
//! (`words`).

use serde_json::Value;

/// The `format` values the strict subset accepts.
pub const STRICT_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The `format` values Anthropic's subset accepts besides [`STRICT_FORMATS`].
const ANTHROPIC_EXTRA_FORMATS: [&str; 1] = ["uri"];

/// Which provider's strict subset a schema is converted into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Subset {
    /// OpenAI's `strict: true` structured outputs (also what vLLM and llama.cpp compile).
    #[default]
    OpenAi,
    /// Anthropic's structured outputs (`output_format` `json_schema`): the OpenAI subset less
    /// the numeric bounds, `maxItems` and a `minItems` above 1, plus the `uri` format.
    Anthropic,
}

impl Subset {
    /// Whether `keyword` (which the OpenAI subset keeps) is outside this subset.
    pub(super) fn refuses(self, keyword: &str, value: &Value) -> bool {
        match self {
            Subset::OpenAi => false,
            Subset::Anthropic => match keyword {
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
                | "maxItems" => true,
                "minItems" => value.as_u64().is_none_or(|n| n > 1),
                _ => false,
            },
        }
    }

    pub(super) fn knows_format(self, format: &str) -> bool {
        STRICT_FORMATS.contains(&format)
            || (self == Subset::Anthropic && ANTHROPIC_EXTRA_FORMATS.contains(&format))
    }
}
