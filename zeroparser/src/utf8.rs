//! UTF-8 validation of the string bytes the decoders borrow from a record (protobuf
//! `string` fields, Avro strings): short ASCII text (codes, flags, names: most string
//! columns) is recognised inline, without a call; longer text goes through `simdutf8`'s
//! validator, which picks AVX2 or SSE 4.2 at run time (std's below 64 bytes or without
//! them). On a record of one 1 KB string, std's `from_utf8` was a third of the decode's
//! samples.

/// `bytes` as text if it is UTF-8.
#[inline(always)]
pub(crate) fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.len() <= 32 && bytes.is_ascii() {
        // SAFETY: every byte is ASCII, and ASCII text is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    simdutf8::basic::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::text;

    proptest::proptest! {
        /// Any bytes, of every length around the inline bound and the 64-byte SIMD chunk:
        /// text exactly when std says so.
        #[test]
        fn text_is_what_std_accepts(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            proptest::prop_assert_eq!(text(&bytes), std::str::from_utf8(&bytes).ok());
        }

        /// Valid text with one byte changed somewhere, at every length.
        #[test]
        fn one_changed_byte_is_judged_as_std_judges_it(
            s in "\\PC{0,120}",
            at in proptest::num::usize::ANY,
            byte in proptest::num::u8::ANY,
        ) {
            let mut bytes = s.into_bytes();
            proptest::prop_assert_eq!(text(&bytes), std::str::from_utf8(&bytes).ok());
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = byte;
                proptest::prop_assert_eq!(text(&bytes), std::str::from_utf8(&bytes).ok());
            }
        }
    }

    #[test]
    fn invalid_text_past_the_inline_bound_and_in_a_simd_chunk_is_refused() {
        for len in [31, 32, 33, 63, 64, 65, 200, 1024] {
            let mut bytes = vec![b'a'; len];
            assert!(text(&bytes).is_some(), "{len}");
            for at in [0, len / 2, len - 1] {
                let saved = bytes[at];
                bytes[at] = 0xFF;
                assert_eq!(text(&bytes), None, "{len} bytes, 0xFF at {at}");
                bytes[at] = saved;
            }
            // A multi-byte character cut at the end.
            bytes.extend_from_slice(&"é".as_bytes()[..1]);
            assert_eq!(text(&bytes), None, "{len} bytes and a cut 'é'");
        }
    }
}
