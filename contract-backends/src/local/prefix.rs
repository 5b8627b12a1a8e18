//! The prefix cache: a prompt's leading system messages, prefilled once, their KV cache kept (a
//! snapshot of the model) and restored while the next request starts with the same messages.

use contract_core::prompt::{Message, Role};

use super::error::LocalError;
use super::state::{LocalBackend, Prefix, State};

impl LocalBackend {
    /// The prompt tokens of `messages` and, when the prefix cache is on, those of its leading
    /// system messages ([`Self::prefix_tokens`]).
    pub(super) fn prompt_and_prefix(
        &self,
        messages: &[Message],
    ) -> Result<(Vec<u32>, Option<Vec<u32>>), LocalError> {
        let prompt = self.prompt_tokens(messages)?;
        let prefix = if self.inner.options.prefix_cache {
            self.prefix_tokens(messages, &prompt)?
        } else {
            None
        };
        Ok((prompt, prefix))
    }

    /// The tokens of the leading system messages, when the template renders them as a prefix of
    /// the whole prompt at a token boundary.
    fn prefix_tokens(
        &self,
        messages: &[Message],
        prompt: &[u32],
    ) -> Result<Option<Vec<u32>>, LocalError> {
        let n = messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        if n == 0 || n == messages.len() {
            return Ok(None);
        }
        let text = match self.inner.template.render(&messages[..n], false) {
            Ok(t) if !t.is_empty() => t,
            _ => return Ok(None),
        };
        let tokens = self.inner.tokenizer.encode_prompt(&text)?;
        Ok((tokens.len() < prompt.len() && prompt.starts_with(&tokens)).then_some(tokens))
    }

    /// Puts the model at the start of a prompt: the cached prefix restored (when it is `prefix`),
    /// or `prefix` computed and cached, or an empty cache. Returns the prompt position to feed
    /// from and how many tokens came from the cache.
    pub(super) fn start_from_prefix(
        state: &mut State,
        prefix: Option<Vec<u32>>,
        calls: &mut u32,
    ) -> Result<(usize, usize), LocalError> {
        let Some(prefix) = prefix.filter(|_| state.model.can_snapshot()) else {
            state.model.reset();
            return Ok((0, 0));
        };
        let mut reused = 0;
        match &state.prefix {
            Some(p) if p.tokens == prefix => {
                state.model.restore_from(&p.model)?;
                reused = prefix.len();
            }
            _ => {
                state.prefix = None;
                state.model.forward(&prefix, 0)?;
                *calls += 1;
                state.prefix = state.model.snapshot().map(|model| Prefix {
                    tokens: prefix.clone(),
                    model,
                });
            }
        }
        Ok((prefix.len(), reused))
    }
}
