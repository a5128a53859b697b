use super::*;

#[test]
fn a_bad_filter_is_named() {
    let error = init(LogFormat::Text, "info,[").unwrap_err();
    assert_eq!(error.to_string(), "invalid log filter `info,[`");
}
