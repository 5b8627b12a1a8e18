pub mod ast;
pub mod attr;
pub mod check;
pub mod ctxt;
mod suggest;
pub mod symbol;

pub use ctxt::Ctxt;
