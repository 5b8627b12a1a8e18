//! Example contracts shared by the demos.
