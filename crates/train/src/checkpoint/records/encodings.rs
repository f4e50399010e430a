//! The walker on hand-encoded MessagePack: every encoding it reads (Burn's files use only a
//! few), the path rules, the sign of short integers and the nesting limit at its boundary.

use super::*;

fn s(text: &str) -> Vec<u8> {
    assert!(text.len() < 32, "a fixstr");
    [&[0xa0 | text.len() as u8][..], text.as_bytes()].concat()
}

/// A map of `entries` (fixmap below 16 entries, else map16).
fn map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out =
        if entries.len() < 16 { vec![0x80 | entries.len() as u8] } else { vec![0xde, 0, entries.len() as u8] };
    for (key, value) in entries {
        out.extend(s(key));
        out.extend(value);
    }
    out
}

fn bin8(bytes: &[u8]) -> Vec<u8> {
    [&[0xc4, bytes.len() as u8][..], bytes].concat()
}

/// A tensor record (`bytes`, `shape`, `dtype`) whose shape entries are given encoded.
fn tensor(bytes: &[u8], shape: &[Vec<u8>], dtype: &str) -> Vec<u8> {
    let mut encoded = vec![0x90 | shape.len() as u8];
    shape.iter().for_each(|d| encoded.extend(d));
    map(&[("bytes", bin8(bytes)), ("shape", encoded), ("dtype", s(dtype))])
}

/// Every scalar, string, binary and container encoding the walker reads.
fn metadata() -> Vec<u8> {
    let mut a16 = vec![0xdc, 0, 17];
    a16.extend(0..17u8);
    map(&[
        ("nil", vec![0xc0]),
        ("t", vec![0xc3]),
        ("f", vec![0xc2]),
        ("neg", vec![0xfb]),
        ("u8", vec![0xcc, 200]),
        ("u16", vec![0xcd, 1, 0]),
        ("u32", vec![0xce, 0, 1, 0, 0]),
        ("u64", vec![0xcf, 0, 0, 0, 1, 0, 0, 0, 0]),
        ("i8", vec![0xd0, 0x9c]),
        ("i16", vec![0xd1, 0xfc, 0x18]),
        ("i32", vec![0xd2, 0xff, 0xff, 0xfc, 0x18]),
        ("i64", vec![0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x18]),
        ("f32", [&[0xca][..], &1.5f32.to_be_bytes()].concat()),
        ("f64", [&[0xcb][..], &1.5f64.to_be_bytes()].concat()),
        ("s8", [&[0xd9, 3][..], b"abc"].concat()),
        ("s16", [&[0xda, 0, 3][..], b"abc"].concat()),
        ("b8", bin8(b"xyz")),
        ("b16", [&[0xc5, 0, 2][..], b"xy"].concat()),
        ("arr", vec![0x93, 1, 2, 3]),
        ("a16", a16),
    ])
}

fn f64s(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `{metadata, item: {layers: {W, h, item, n}}}`: shapes written with every integer encoding.
fn document() -> Vec<u8> {
    let w = map(&[
        ("id", s("0123456789abc")),
        ("param", tensor(&f64s(&[0.5; 6]), &[vec![0xcd, 0, 2], vec![0xd0, 3]], "F64")),
    ]);
    let h = map(&[("param", tensor(&[0; 8], &[vec![0xd1, 0, 4]], "F16"))]);
    let i = map(&[("param", tensor(&[0; 3], &[vec![0xd2, 0, 0, 0, 3]], "I8"))]);
    let n = map(&[("param", tensor(&f64s(&[1.0, f64::NAN]), &[vec![0xd3, 0, 0, 0, 0, 0, 0, 0, 2]], "F64"))]);
    let layers = map(&[("W", w), ("h", h), ("item", i), ("n", n)]);
    map(&[("metadata", metadata()), ("item", map(&[("layers", layers)]))])
}

/// Levels: `item` only at the top, `param` never, a capitalized key only alone in its map (a
/// variant); every encoding is walked to the document's last byte.
#[test]
fn every_encoding_is_walked_and_paths_keep_the_right_levels() {
    let found = scan(&document()).unwrap();
    let got: Vec<(&str, &[usize], &str, Option<usize>)> =
        found.iter().map(|t| (t.path.as_str(), t.shape.as_slice(), t.dtype.as_str(), t.first_non_finite)).collect();
    let want: Vec<(&str, &[usize], &str, Option<usize>)> = vec![
        ("layers.W", &[2, 3], "F64", None),
        ("layers.h", &[4], "F16", None),
        ("layers.item", &[3], "I8", None),
        ("layers.n", &[2], "F64", Some(1)),
    ];
    assert_eq!(got, want);
    assert_eq!(found[0].id.as_deref(), Some("0123456789abc"));
}

/// −1, −100 and −1000 in the signed encodings are not sizes: each is sign-extended from its
/// own width (−100 read with a wrong width can come out as 28, −1000 as 24).
#[test]
fn a_negative_shape_entry_in_any_encoding_is_not_a_size() {
    for negative in [
        vec![0xff],
        vec![0xd0, 0xff],
        vec![0xd0, 0x9c],
        vec![0xd1, 0xff, 0xff],
        vec![0xd1, 0xfc, 0x18],
        vec![0xd2, 0xff, 0xff, 0xfc, 0x18],
        vec![0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    ] {
        let doc =
            map(&[("item", map(&[("t", map(&[("param", tensor(&[], std::slice::from_ref(&negative), "F32"))]))]))]);
        let error = scan(&doc).unwrap_err();
        assert!(error.contains("t: a shape entry is not a size"), "{negative:?}: {error}");
    }
}

/// `depth` arrays around a nil.
fn nested(depth: usize) -> Vec<u8> {
    let mut out = vec![0x91; depth];
    out.push(0xc0);
    out
}

#[test]
fn nesting_is_refused_exactly_past_max_depth_through_arrays_map_values_and_keys() {
    assert!(scan(&nested(MAX_DEPTH)).is_ok());
    assert!(scan(&nested(MAX_DEPTH + 1)).unwrap_err().contains("nested deeper"));
    let mut values = vec![0x81, 0xa1, b'k'];
    values.extend(nested(MAX_DEPTH - 1));
    assert!(scan(&values).is_ok(), "a map's value is one level down");
    values.insert(3, 0x91);
    assert!(scan(&values).unwrap_err().contains("nested deeper"));
    let mut keys = vec![0x81];
    keys.extend(nested(MAX_DEPTH));
    keys.push(0xc0);
    assert!(scan(&keys).unwrap_err().contains("nested deeper"), "a map's key is one level down");
}

#[test]
fn a_length_longer_than_the_bytes_left_is_refused_with_the_count() {
    let doc = [&[0xdb, 0x40, 0, 0, 0][..], b"abc"].concat();
    assert_eq!(scan(&doc).unwrap_err(), "a length of 1073741824 at byte 5 with only 3 bytes left");
}
