//! Tests of the controllers of the `apps` API group.

mod deployment;
// +rsbuilder:scaffold:kinds
