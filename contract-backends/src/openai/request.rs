//! The request body: the chat messages in async-openai's types, and what each [`Mode`] adds to
//! them (a strict schema, a schema grounded in the document, a grounded Lark grammar). Apart
//! from sending and reading, which never look inside the body.

use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, ResponseFormat, ResponseFormatJsonSchema,
};
use contract_core::extract::{BackendError, Decoding, Request};
use contract_core::prompt::Role;
use serde_json::Value;

use super::client::{MaxTokensField, Mode, OpenAiBackend};
use crate::http::schema_name;

/// The request's grammar in llguidance's Lark syntax: grounded in the request's document when the
/// contract grounds values, else the plain JSON grammar (`start: %json {..}`).
fn lark_grammar(req: &Request) -> Result<String, BackendError> {
    let lark = contract_lark(req)?;
    match req.constraint.think {
        // Think, then fill: the reasoning block in front of the contract's grammar.
        Some(think) => think
            .wrap_lark(&lark)
            .ok_or_else(|| BackendError::InvalidRequest {
                message: "the contract's grammar has no start rule to put a reasoning block before"
                    .into(),
            }),
        None => Ok(lark),
    }
}

/// [`lark_grammar`] without a reasoning block.
fn contract_lark(req: &Request) -> Result<String, BackendError> {
    let invalid = |message: String| BackendError::InvalidRequest { message };
    let grammar = match &req.constraint.decoding {
        Some(Decoding::Grammar(g)) => g,
        // A plain JSON Schema (a runtime contract): llguidance's JSON compiler.
        Some(Decoding::JsonSchema(schema)) => return Ok(format!("start: %json {schema}")),
        None => {
            return Err(invalid(format!(
                "mode `vllm_guided_grammar` needs the contract's grammar, the request for `{}` \
                 has none",
                req.contract()
            )))
        }
    };
    match &req.source {
        Some(source) if grammar.is_grounded() => grammar
            .static_grounded_lark(&contract_core::ground::Grounds::new(source))
            .map_err(|e| invalid(e.to_string())),
        _ => Ok(grammar.lark()),
    }
}

/// The contract's JSON Schema with its values grounded in the request's document, as far as a
/// schema can say it ([`Grammar::static_grounded_schema`](contract_core::grammar::Grammar::static_grounded_schema)):
/// `None` when the request has no document, no contract grammar, or nothing grounded.
fn grounded_schema(req: &Request) -> Option<Value> {
    let source = req.source.as_ref()?;
    let grammar = req.constraint.grammar()?;
    grammar
        .is_grounded()
        .then(|| grammar.static_grounded_schema(&contract_core::ground::Grounds::new(source)))
}

/// The chat messages in async-openai's request types.
pub(super) fn chat_messages(
    messages: &contract_core::prompt::Messages,
) -> Vec<ChatCompletionRequestMessage> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::System => ChatCompletionRequestMessage::System(
                ChatCompletionRequestSystemMessage::from(m.content.as_str()),
            ),
            Role::User => ChatCompletionRequestMessage::User(
                ChatCompletionRequestUserMessage::from(m.content.as_str()),
            ),
            Role::Assistant => {
                ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                    content: Some(m.content.as_str().into()),
                    ..Default::default()
                })
            }
        })
        .collect()
}

impl OpenAiBackend {
    /// The JSON body sent for `req` (useful to inspect what a mode sends).
    ///
    /// Fails with [`BackendError::InvalidRequest`] when the mode needs a strict schema and the
    /// contract has none.
    pub fn request_body(&self, req: &Request) -> Result<Value, BackendError> {
        let messages = chat_messages(&req.messages);
        let strict_schema = || {
            req.constraint
                .strict_schema
                .clone()
                .ok_or_else(|| BackendError::InvalidRequest {
                    message: format!(
                        "mode `{}` needs a strict schema and contract `{}` has none \
                     (use json_mode or prompt_only)",
                        self.mode.as_str(),
                        req.contract()
                    ),
                })
        };
        let response_format = match self.mode {
            Mode::StructuredOutputs => Some(ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: None,
                    name: schema_name(req.contract()),
                    schema: strict_schema()?,
                    strict: Some(true),
                },
            }),
            Mode::JsonMode | Mode::JsonObjectSchema => Some(ResponseFormat::JsonObject),
            Mode::PromptOnly | Mode::VllmGuidedJson | Mode::VllmGuidedGrammar => None,
        };
        // A reasoning block's tokens come on top of the answer's limit.
        let max_tokens = req.max_tokens.map(|n| req.constraint.generation_limit(n));
        #[allow(deprecated)] // `max_tokens` and `seed` are still what compatible servers read
        let typed = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages,
            response_format,
            temperature: req.sampling.temperature,
            top_p: req.sampling.top_p,
            seed: req.sampling.seed.map(|s| (s & i64::MAX as u64) as i64),
            max_tokens: max_tokens.filter(|_| self.max_tokens_field == MaxTokensField::MaxTokens),
            max_completion_tokens: max_tokens
                .filter(|_| self.max_tokens_field == MaxTokensField::MaxCompletionTokens),
            ..Default::default()
        };
        let mut body = serde_json::to_value(&typed).map_err(|e| BackendError::InvalidRequest {
            message: format!("cannot serialise the request: {e}"),
        })?;
        // The schema a server compiles into its own grammar: grounded in the document where the
        // request has one and a schema can say it, else the strict schema.
        let server_schema = || match grounded_schema(req) {
            Some(schema) => Ok(schema),
            None => strict_schema(),
        };
        match (self.mode, &mut body) {
            (Mode::VllmGuidedJson, Value::Object(map)) => {
                map.insert("guided_json".to_owned(), server_schema()?);
            }
            (Mode::JsonObjectSchema, Value::Object(map)) => {
                if let Some(Value::Object(rf)) = map.get_mut("response_format") {
                    rf.insert("schema".to_owned(), server_schema()?);
                }
            }
            (Mode::VllmGuidedGrammar, Value::Object(map)) => {
                map.insert(
                    "guided_grammar".to_owned(),
                    Value::String(lark_grammar(req)?),
                );
            }
            _ => {}
        }
        Ok(body)
    }

    /// The JSON body sent for `req` by [`Backend::complete_streaming`]:
    /// [`request_body`](Self::request_body) with `stream: true` and, unless turned off with
    /// [`OpenAiBuilder::stream_usage`], `stream_options: {include_usage: true}`.
    ///
    /// [`Backend::complete_streaming`]: contract_core::extract::Backend::complete_streaming
    /// [`OpenAiBuilder::stream_usage`]: super::OpenAiBuilder::stream_usage
    pub fn streaming_body(&self, req: &Request) -> Result<Value, BackendError> {
        let mut body = self.request_body(req)?;
        if let Value::Object(map) = &mut body {
            map.insert("stream".to_owned(), Value::Bool(true));
            if self.stream_usage {
                map.insert(
                    "stream_options".to_owned(),
                    serde_json::json!({"include_usage": true}),
                );
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_modes() {
        assert_eq!(schema_name("Guidance"), "Guidance");
        assert_eq!(schema_name("a b.c"), "a_b_c");
        assert_eq!(schema_name(""), "contract");
        assert_eq!("json".parse::<Mode>(), Ok(Mode::JsonMode));
        assert_eq!("vllm-guided-json".parse::<Mode>(), Ok(Mode::VllmGuidedJson));
        assert_eq!("llama_cpp".parse::<Mode>(), Ok(Mode::JsonObjectSchema));
        assert!("x".parse::<Mode>().is_err());
        assert_eq!("lark".parse::<Mode>(), Ok(Mode::VllmGuidedGrammar));
    }

    #[test]
    fn schema_modes_send_the_grounded_schema() {
        use examples::filings::GroundedGuidance;
        let doc = "Acme Reports Second Quarter 2024 Results\n\
                   For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million.";
        let mut req = Request::new(
            contract_core::Constraint::of::<GroundedGuidance>(),
            contract_core::prompt::Messages::for_contract::<GroundedGuidance>(doc),
        );
        req.source = Some(contract_core::Source::from_text(doc));
        let backend = |mode| {
            OpenAiBackend::builder("m")
                .mode(mode)
                .base_url("http://127.0.0.1:9")
                .build()
                .expect("backend")
        };
        let llama = backend(Mode::JsonObjectSchema)
            .request_body(&req)
            .expect("body");
        let vllm = backend(Mode::VllmGuidedJson)
            .request_body(&req)
            .expect("body");
        for schema in [&llama["response_format"]["schema"], &vllm["guided_json"]] {
            let text = schema.to_string();
            // The release's amounts; `2024` is written only in its periods, so it is not one.
            assert!(
                text.contains("[4065,4140]") && !text.contains("2024,4065"),
                "the release's amounts: {text}"
            );
            assert!(
                text.contains("For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million."),
                "{text}"
            );
        }
        // Without a document: the strict schema, as before.
        req.source = None;
        let llama = backend(Mode::JsonObjectSchema)
            .request_body(&req)
            .expect("body");
        assert_eq!(
            Some(&llama["response_format"]["schema"]),
            req.constraint.strict_schema.as_ref()
        );
    }

    #[test]
    fn guided_grammar_grounds_values_in_the_document() {
        use examples::filings::GroundedGuidance;
        let doc = "Acme Reports Second Quarter 2024 Results\n\
                   For the third quarter of 2024, Acme expects revenue of $4,065 to $4,140 million.";
        let backend = OpenAiBackend::builder("m")
            .mode(Mode::VllmGuidedGrammar)
            .base_url("http://127.0.0.1:9")
            .build()
            .expect("backend");
        let constraint = contract_core::Constraint::of::<GroundedGuidance>();
        let mut req = Request::new(
            std::sync::Arc::new(contract_core::Constraint {
                strict_schema: None,
                ..(*constraint).clone()
            }),
            contract_core::prompt::Messages::for_contract::<GroundedGuidance>(doc),
        );
        req.source = Some(contract_core::Source::from_text(doc));
        let body = backend.request_body(&req).expect("body");
        let lark = body["guided_grammar"].as_str().unwrap_or_default();
        // The quote is one of the document's lines; the numbers are the document's.
        assert!(
            lark.contains("expects revenue of $4,065 to $4,140 million."),
            "{lark}"
        );
        assert!(
            lark.contains("\"4065\"") && lark.contains("\"4140\""),
            "{lark}"
        );
        assert!(body.get("response_format").is_none());
        // Without a document the grammar is the plain JSON one.
        req.source = None;
        let body = backend.request_body(&req).expect("body");
        let lark = body["guided_grammar"].as_str().unwrap_or_default();
        assert!(lark.starts_with("start: %json"), "{lark}");
        // Without a grammar the request is refused before anything is sent.
        req.constraint = std::sync::Arc::new(req.constraint.with_decoding(None));
        let err = backend.request_body(&req).expect_err("no grammar");
        assert_eq!(err.kind(), "invalid_request");
    }
}
