//! Tests of the controllers of the `fiz.testproject.org` API group.

mod bar;
// +rsbuilder:scaffold:kinds
