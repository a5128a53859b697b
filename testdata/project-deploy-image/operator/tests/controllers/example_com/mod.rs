//! Tests of the controllers of the `example.com.learn.com` API group.

mod memcached;
// +rsbuilder:scaffold:kinds
