//! Tests of the controllers of the `example.com.testproject.org` API group.

mod memcached;

mod busybox;

mod wordpress;
// +rsbuilder:scaffold:kinds
