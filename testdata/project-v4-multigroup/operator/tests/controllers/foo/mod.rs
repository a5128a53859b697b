//! Tests of the controllers of the `foo.testproject.org` API group.

mod bar;
// +rsbuilder:scaffold:kinds
