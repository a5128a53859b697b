//! The controllers of the `sea-creatures.testproject.org` API group.

pub mod kraken;

pub mod leviathan;

pub mod prawn;
// +rsbuilder:scaffold:controllers
