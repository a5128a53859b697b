//! Tests of the controllers of the `ship.testproject.org` API group.

mod frigate;

mod destroyer;

mod cruiser;
// +rsbuilder:scaffold:kinds
