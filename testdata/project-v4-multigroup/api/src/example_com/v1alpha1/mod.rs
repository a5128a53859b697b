//! Version `v1alpha1` of the `example.com.testproject.org` API group.

pub mod memcached;
pub use self::memcached::Memcached;

pub mod busybox;
pub use self::busybox::Busybox;
// +rsbuilder:scaffold:kinds
