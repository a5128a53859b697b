//! Version `v1` of the `fleet.learn.com` API group.

pub mod r#loop;
pub use r#loop::Loop;

pub mod person;
pub use person::Person;
// +rsbuilder:scaffold:kinds
