#[test]
fn versions_parse() {
    assert_eq!(super::parse_version("3.3a"), (3, 3));
    assert_eq!(super::parse_version("next-3.4"), (3, 4));
    assert_eq!(super::parse_version("2.9"), (2, 9));
}
