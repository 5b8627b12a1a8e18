//! What a backend can enforce of a contract: its renderings for backends, computed once per
//! contract type and shared by every request ([`Request::constraint`](crate::Request)).
//!
//! A remote API takes the [strict schema](Constraint::strict_schema), a constrained decoder the
//! [decoding](Constraint::decoding) (a contract's typed [`Grammar`], or a plain JSON Schema for a
//! runtime contract), and every backend the messages, which already hold the
//! [signature](Constraint::signature). Nothing in a request is rendered or parsed again per
//! attempt: a backend reads the typed value it supports.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::contract::Contract;
use crate::dynamic::DynContract;
use crate::grammar::{Grammar, Think};
use crate::ir::ContractSpec;

/// How a constrained decoder holds a reply to a contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decoding {
    /// A derived contract's token-mask spec: the syntax, the groundings and the cross-field rules
    /// (also a runtime contract's, where [`DynContract::decodes_typed`]).
    Grammar(Arc<Grammar>),
    /// A plain JSON Schema for llguidance's JSON compiler, with no cross-field rules: a runtime
    /// contract's [`DynContract::grammar`].
    JsonSchema(Arc<Value>),
}

/// A contract as backends take it: built once per contract type ([`Constraint::of`]) or per
/// runtime contract ([`Constraint::from_dyn`]) and shared through an [`Arc`].
///
/// ```
/// use contract_core::{Constraint, Contract};
///
/// #[derive(Contract, serde::Serialize, serde::Deserialize)]
/// struct Weather {
///     #[contract(range = -90..=60)]
///     celsius: i32,
/// }
///
/// let c = Constraint::of::<Weather>();
/// assert_eq!(c.name, "Weather");
/// assert!(c.grammar().is_some());
/// assert!(c.strict_schema.is_some());
/// // The same value for every request of the type.
/// assert!(std::sync::Arc::ptr_eq(&c, &Constraint::of::<Weather>()));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constraint {
    /// The contract's name.
    pub name: String,
    /// The contract's one-line signature (the system message already holds it).
    pub signature: String,
    /// The OpenAI strict structured-outputs schema, when the contract has one.
    pub strict_schema: Option<Value>,
    /// What a constrained decoder enforces; `None` leaves the reply unconstrained.
    pub decoding: Option<Decoding>,
    /// Think, then fill: the reply opens with a reasoning block of at most this many tokens
    /// (`<think> .. </think>`), then the contract ([`Think`]). A backend that decodes under a
    /// grammar holds the trace to its cap and what follows to the decoding as always (the local
    /// backend; an OpenAI-compatible server in a mode that takes a grammar); a backend that
    /// cannot carry a trace in what it enforces says so in its documentation. `None`: the
    /// contract from the first token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
}

impl Constraint {
    /// The constraint of contract `C`, rendered on the first call for `C` and shared afterwards.
    pub fn of<C: Contract>() -> Arc<Constraint> {
        // Rendered outside the cache's lock: a contract's renderings may ask for a nested
        // contract's.
        crate::cache::per_type::<C, Arc<Constraint>>(|| Arc::new(Constraint::for_contract::<C>()))
            .clone()
    }

    /// Renders contract `C`'s constraint (uncached: [`Constraint::of`] keeps one per type).
    pub fn for_contract<C: Contract>() -> Constraint {
        Constraint {
            name: C::contract_spec().name.clone(),
            signature: C::signature(),
            strict_schema: C::try_strict_schema().ok(),
            decoding: Some(Decoding::Grammar(Arc::new(C::grammar()))),
            think: None,
        }
    }

    /// The constraint of the contract `spec` describes (a derived contract's, or a part of one:
    /// [`ContractSpec::subset`]), rendered now: its signature, strict schema and grammar.
    pub fn for_spec(spec: &ContractSpec) -> Constraint {
        let schema = crate::schema::root_schema(spec);
        Constraint {
            name: spec.name.clone(),
            signature: crate::signature::signature(spec),
            strict_schema: crate::schema::strict_schema(&schema).ok().map(|s| s.schema),
            decoding: Some(Decoding::Grammar(Arc::new(Grammar::of(spec)))),
            think: None,
        }
    }

    /// A runtime contract's constraint: its strict schema when it has one, and its grammar
    /// schema ([`DynContract::grammar`]) for a constrained decoder.
    pub fn from_dyn(contract: &DynContract) -> Constraint {
        Constraint {
            name: contract.name().to_owned(),
            signature: contract.signature(),
            strict_schema: contract.strict_schema().ok().map(|s| s.schema),
            decoding: Some(Decoding::JsonSchema(Arc::new(contract.grammar()))),
            think: None,
        }
    }

    /// A constraint that constrains nothing: a request with only its messages.
    pub fn unconstrained(name: impl Into<String>) -> Constraint {
        Constraint {
            name: name.into(),
            signature: String::new(),
            strict_schema: None,
            decoding: None,
            think: None,
        }
    }

    /// The contract's grammar, when the decoding is one.
    pub fn grammar(&self) -> Option<&Arc<Grammar>> {
        match &self.decoding {
            Some(Decoding::Grammar(g)) => Some(g),
            _ => None,
        }
    }

    /// This constraint with a reasoning block of `think` before the contract
    /// ([`Constraint::think`]; `None`: none).
    ///
    /// ```
    /// use contract_core::{grammar::Think, Constraint, Contract};
    ///
    /// #[derive(Contract, serde::Serialize, serde::Deserialize)]
    /// struct Weather {
    ///     celsius: i32,
    /// }
    ///
    /// let c = Constraint::of::<Weather>().with_think(Some(Think::new(128)));
    /// assert_eq!(c.think, Some(Think { max_tokens: 128 }));
    /// assert_eq!(c.decoding, Constraint::of::<Weather>().decoding);
    /// ```
    pub fn with_think(&self, think: Option<Think>) -> Constraint {
        Constraint {
            think,
            ..self.clone()
        }
    }

    /// The token limit of a generation whose answer may take `answer` tokens: `answer`, plus
    /// [`Think::overhead_tokens`] when the reply opens with a reasoning block (the trace's cap
    /// and its tags come on top of the answer's limit).
    pub fn generation_limit(&self, answer: u32) -> u32 {
        match self.think {
            Some(think) => answer.saturating_add(think.overhead_tokens()),
            None => answer,
        }
    }

    /// This constraint with `decoding` instead of its own (an application that edits the
    /// grammar, such as the study's ablation modes).
    pub fn with_decoding(&self, decoding: Option<Decoding>) -> Constraint {
        Constraint {
            decoding,
            ..self.clone()
        }
    }

    /// This constraint decoding with its grammar's groundings removed
    /// ([`Grammar::without_grounding`]): what an [`Extractor`](crate::Extractor) with grounding
    /// off decodes with.
    pub(crate) fn ungrounded(&self) -> Constraint {
        let decoding = self
            .grammar()
            .map(|g| Decoding::Grammar(Arc::new(Grammar::clone(g).without_grounding())));
        match decoding {
            Some(d) => self.with_decoding(Some(d)),
            None => self.clone(),
        }
    }
}
