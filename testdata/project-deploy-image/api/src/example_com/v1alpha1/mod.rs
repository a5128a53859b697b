//! Version `v1alpha1` of the `example.com.learn.com` API group.

pub mod memcached;
pub use self::memcached::Memcached;
// +rsbuilder:scaffold:kinds
