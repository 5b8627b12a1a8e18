//! Built-in value types, each itself a contract.
