//! A backend that plays a script: fixed replies (or errors) in order, recording every request.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use contract_core::extract::{Backend, BackendError, Request, Response};

/// Answers requests from a script, in order, and records the requests it got.
///
/// When the script runs out, every further request gets [`BackendError::Unavailable`].
#[derive(Debug, Default)]
pub struct ScriptedBackend {
    script: Mutex<VecDeque<Result<Response, BackendError>>>,
    requests: Mutex<Vec<Request>>,
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
        }
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
