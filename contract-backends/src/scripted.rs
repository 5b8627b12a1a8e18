//! A backend that plays a script: fixed replies (or errors) in order, recording every request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use contract_core::extract::{
    Backend, BackendError, Request, Response, ScoreRequest, ScoreResponse,
};

/// The scorer of a [`ScriptedBackend`]: the log-probability it gives an answer (second
/// argument) to a scoring prompt whose last message is the first.
pub type ScriptedScorer = Arc<dyn Fn(&str, &str) -> f64 + Send + Sync>;

/// Answers requests from a script, in order, and records the requests it got.
///
/// When the script runs out, every further request gets [`BackendError::Unavailable`]. It does
/// not score answers ([`Backend::score`] is unsupported) unless given a judge
/// ([`ScriptedBackend::with_judge`]) or a scorer ([`ScriptedBackend::with_scorer`]).
#[derive(Default)]
pub struct ScriptedBackend {
    script: Mutex<VecDeque<Result<Response, BackendError>>>,
    requests: Mutex<Vec<Request>>,
    judge: Option<ScriptedScorer>,
    scored: Mutex<Vec<ScoreRequest>>,
}

impl std::fmt::Debug for ScriptedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedBackend")
            .field("remaining", &self.remaining())
            .field("requests", &lock(&self.requests).len())
            .field("judge", &self.judge.is_some())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ScriptedBackend {
    /// A backend that replies with `replies`, in order.
    pub fn new<I, S>(replies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::from_script(replies.into_iter().map(|r| Ok(Response::text(r))))
    }

    /// A backend that plays `steps` (responses or errors), in order.
    pub fn from_script(steps: impl IntoIterator<Item = Result<Response, BackendError>>) -> Self {
        ScriptedBackend {
            script: Mutex::new(steps.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            judge: None,
            scored: Mutex::new(Vec::new()),
        }
    }

    /// The same backend scoring answers with `judge`: for each prompt, the margin it gives the
    /// prompt's last message, split as `log P(yes) = margin / 2`, `log P(no) = -margin / 2` for
    /// the answers `yes` and `no` (any other answer scores `-inf`).
    pub fn with_judge(self, judge: impl Fn(&str) -> f64 + Send + Sync + 'static) -> Self {
        self.with_scorer(move |prompt, answer| match answer {
            "yes" => judge(prompt) / 2.0,
            "no" => -judge(prompt) / 2.0,
            _ => f64::NEG_INFINITY,
        })
    }

    /// The same backend scoring answers with `scorer`: the log-probability of each answer
    /// given the text of the prompt's last message (a test states which values a model would
    /// find likely).
    pub fn with_scorer(
        mut self,
        scorer: impl Fn(&str, &str) -> f64 + Send + Sync + 'static,
    ) -> Self {
        self.judge = Some(Arc::new(scorer));
        self
    }

    /// The scoring requests received so far, in order.
    pub fn score_requests(&self) -> Vec<ScoreRequest> {
        lock(&self.scored).clone()
    }

    /// Appends a reply.
    pub fn push_reply(&self, text: impl Into<String>) -> &Self {
        self.push_response(Response::text(text))
    }

    /// Appends a full response.
    pub fn push_response(&self, response: Response) -> &Self {
        lock(&self.script).push_back(Ok(response));
        self
    }

    /// Appends an error.
    pub fn push_error(&self, error: BackendError) -> &Self {
        lock(&self.script).push_back(Err(error));
        self
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.requests).clone()
    }

    /// How many steps of the script are left.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

impl Backend for ScriptedBackend {
    async fn complete(&self, req: &Request) -> Result<Response, BackendError> {
        lock(&self.requests).push(req.clone());
        let next = lock(&self.script).pop_front();
        next.unwrap_or_else(|| {
            Err(BackendError::Unavailable {
                message: "the script has no more replies".to_owned(),
            })
        })
    }

    async fn score(&self, req: &ScoreRequest) -> Result<ScoreResponse, BackendError> {
        let Some(judge) = &self.judge else {
            return Err(BackendError::Unsupported {
                message: "the scripted backend has no judge".to_owned(),
            });
        };
        lock(&self.scored).push(req.clone());
        let logprobs = req
            .prompts
            .iter()
            .map(|p| {
                let text = p.0.last().map_or("", |m| m.content.as_str());
                req.answers.iter().map(|a| judge(text, a)).collect()
            })
            .collect();
        Ok(ScoreResponse {
            logprobs,
            exact: true,
            forward_calls: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract_core::prompt::Messages;

    fn request() -> Request {
        Request::new(
            std::sync::Arc::new(contract_core::Constraint::unconstrained("T")),
            Messages::default(),
        )
    }

    #[tokio::test(flavor = "current_thread")]
    async fn plays_in_order() {
        let b = ScriptedBackend::new(["one"]);
        let timeout = BackendError::Timeout {
            after_ms: 5,
            attempts: 1,
            elapsed_ms: 5,
        };
        b.push_error(timeout.clone());
        assert_eq!(
            b.complete(&request()).await.map(|r| r.text),
            Ok("one".into())
        );
        assert_eq!(b.complete(&request()).await.map(|r| r.text), Err(timeout));
        assert!(matches!(
            b.complete(&request()).await,
            Err(BackendError::Unavailable { .. })
        ));
        assert_eq!(b.requests().len(), 3);
        assert_eq!(b.remaining(), 0);
    }
}
