//! Tests of the controllers of the `crew.testproject.org` API group.

mod captain;

mod captain_backup;
// +rsbuilder:scaffold:kinds
