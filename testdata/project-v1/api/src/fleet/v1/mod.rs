//! Version `v1` of the `fleet.learn.com` API group.

pub mod r#loop;
pub use self::r#loop::Loop;

pub mod person;
pub use self::person::Person;
// +rsbuilder:scaffold:kinds
