//! The model's chat template (`tokenizer.chat_template` in the GGUF), rendered with minijinja;
//! ChatML when the file has none.

use minijinja::{context, Environment, Error, ErrorKind};
use serde::Serialize;

use contract_core::prompt::Message;

use super::error::LocalError;
use super::gguf_tokenizer::GgufTokenizer;

/// ChatML, used when the GGUF has no template.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The most instructions one rendering may run: a chat template loops over a few messages, so
/// a template that runs out of them loops without end (or nearly so).
pub const TEMPLATE_FUEL: u64 = 1_000_000;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .finish()
    }
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'a str,
    content: &'a str,
}

fn raise_exception(message: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

impl ChatTemplate {
    /// Compiles `source` (Jinja, as in Hugging Face chat templates).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, LocalError> {
        let mut env = Environment::new();
        env.set_fuel(Some(TEMPLATE_FUEL));
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| LocalError::library("chat template", e))?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// ChatML.
    pub fn chatml() -> Self {
        Self::new(CHATML, "", "<|im_end|>").expect("ChatML compiles")
    }

    /// The template of the tokenizer's GGUF (ChatML when it has none), with its BOS / EOS texts.
    pub fn for_tokenizer(tok: &GgufTokenizer) -> Result<Self, LocalError> {
        let source = tok.vocab().chat_template.as_deref().unwrap_or(CHATML);
        Self::new(
            source,
            tok.bos_text().unwrap_or(""),
            tok.eos_text().unwrap_or(""),
        )
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt`, ends with the assistant's turn opening.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, LocalError> {
        let msgs: Vec<Msg<'_>> = messages
            .iter()
            .map(|m| Msg {
                role: m.role.as_str(),
                content: &m.content,
            })
            .collect();
        let tmpl = self
            .env
            .get_template("chat")
            .map_err(|e| LocalError::library("chat template", e))?;
        tmpl.render(context! {
            messages => msgs,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        })
        .map_err(|e| match e.kind() {
            ErrorKind::OutOfFuel => LocalError::Template(format!(
                "rendering did not finish within {TEMPLATE_FUEL} instructions (a loop without \
                 end?)"
            )),
            _ => LocalError::library("chat template", e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders() {
        let t = ChatTemplate::chatml();
        let s = t
            .render(&[Message::system("S"), Message::user("U")], true)
            .unwrap();
        assert_eq!(s, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn a_template_that_loops_runs_out_of_fuel() {
        let t = ChatTemplate::new(
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        let err = t
            .render(&[Message::user("x")], true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did not finish within 1000000 instructions"),
            "{err}"
        );
        let t = ChatTemplate::new(
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "",
            "",
        )
        .unwrap();
        let err = t
            .render(&[Message::user("x")], true)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("chat template: "), "{err}");
    }

    #[test]
    fn raise_exception_and_python_methods() {
        let t = ChatTemplate::new(
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}{{ bos_token }}{{ messages[0]['content'].strip() }}",
            "<s>",
            "</s>",
        )
        .unwrap();
        assert_eq!(
            t.render(&[Message::system("  hi ")], false).unwrap(),
            "<s>hi"
        );
        let err = t
            .render(&[Message::user("x")], false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("system first"), "{err}");
    }
}
