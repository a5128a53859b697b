//! Tests of the controllers of the `sea-creatures.testproject.org` API group.

mod kraken;

mod leviathan;

mod prawn;
// +rsbuilder:scaffold:kinds
