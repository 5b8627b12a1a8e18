pub mod ast;
pub mod attr;
mod case;
pub mod check;
pub mod ctxt;
mod suggest;
pub mod symbol;

pub use ctxt::Ctxt;
