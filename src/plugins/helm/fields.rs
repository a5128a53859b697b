//! Reading the fields of the install file's objects.

use serde_yaml::Value;

/// The object's kind.
pub fn kind(object: &Value) -> &str {
    str_at(object, &["kind"]).unwrap_or_default()
}

/// The object's name.
pub fn name(object: &Value) -> &str {
    str_at(object, &["metadata", "name"]).unwrap_or_default()
}

/// The string at `path`.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

/// The value at `path`.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, key| value.get(*key))
}

pub fn at_mut<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(value, |value, key| value.get_mut(*key))
}
