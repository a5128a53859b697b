//! The controllers of the `ship.testproject.org` API group.

pub mod frigate;

pub mod destroyer;

pub mod cruiser;
// +rsbuilder:scaffold:controllers
