//! Tests of the controllers of the `` API group.

mod pod;
// +rsbuilder:scaffold:kinds
