//! [`Scanner`]: a strict reader of JSON tokens over one record's text for the one-pass
//! decode (`json::into`), without serde. It reads the common forms itself and answers `None`
//! wherever it is not sure it would agree with serde_json: then the caller decodes the record
//! through the value tree (serde_json), which accepts or rejects it and gives the error.
//!
//! Read here: whitespace, `null` / `true` / `false`, strings without escapes (borrowed) or
//! with the two-character escapes (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`; copied),
//! integers that fit serde_json's `u64` / `i64` forms, and decimals whose digits fit a `u64`
//! with a power of ten up to 308 by serde_json's own conversion without `float_roundtrip`
//! (found at run time, see [`serde_powers`]; with `float_roundtrip`, which rounds correctly,
//! only digits up to 2^53 with a power up to 22: one rounding, the correct double). Other
//! decimals are parsed by serde_json itself. Left to the value tree: `\u` escapes, control
//! characters in strings, integers beyond `u64`, and any syntax error.

use std::borrow::Cow;
use std::sync::OnceLock;

/// The powers of ten that are exact doubles.
const EXACT: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The powers of ten serde_json's decimal conversion divides or multiplies by, if it is the
/// one without the `float_roundtrip` feature (`significand as f64` times or divided by the
/// double nearest `10^e`, e ≤ 308); `None` if it rounds correctly instead. Found once by
/// asking serde_json to read a decimal the two conversions round differently.
fn serde_powers() -> Option<&'static [f64]> {
    static POWERS: OnceLock<Option<Vec<f64>>> = OnceLock::new();
    POWERS
        .get_or_init(|| {
            let powers = (0..=308)
                .map(|e| format!("1e{e}").parse::<f64>().ok())
                .collect::<Option<Vec<f64>>>()?;
            let probe: f64 = serde_json::from_str("74187060.866652760").ok()?;
            let truncating = 74_187_060_866_652_760_u64 as f64 / powers.get(9)?;
            (probe.to_bits() == truncating.to_bits()).then_some(powers)
        })
        .as_deref()
}

/// Reads digits from `i` eight at a time into `significand` (`× 10^8 + the eight`) for as
/// long as eight digits follow and the result fits a `u64`; returns it and the index after
/// the digits read. The digits it leaves (fewer than eight, or eight that would overflow)
/// are read one by one by the caller, exactly as before, so the result never differs from
/// the digit loop's. A decimal from a float formatter has 16 or 17 digits: two rounds.
#[inline(always)]
fn eight_digits_at_a_time(bytes: &[u8], mut significand: u64, mut i: usize) -> (u64, usize) {
    while let Some(chunk) = bytes.get(i..).and_then(|rest| rest.first_chunk::<8>()) {
        let word = u64::from_le_bytes(*chunk);
        // Every byte in b'0'..=b'9': its high nibble 3, and adding 6 keeps it 3.
        let nibbles = 0xF0F0_F0F0_F0F0_F0F0;
        if word & nibbles != 0x3030_3030_3030_3030
            || word.wrapping_add(0x0606_0606_0606_0606) & nibbles != 0x3030_3030_3030_3030
        {
            break;
        }
        let Some(next) = significand
            .checked_mul(100_000_000)
            .and_then(|s| s.checked_add(eight_digits(word)))
        else {
            break;
        };
        significand = next;
        i += 8;
    }
    (significand, i)
}

/// The value of eight ASCII digits loaded little-endian (the first digit the most
/// significant): pairs, then fours, then the eight, by multiplications of their lanes.
#[inline(always)]
fn eight_digits(word: u64) -> u64 {
    let digits = word - 0x3030_3030_3030_3030;
    // Each byte pair: 10 × first + second (in the low byte of the pair).
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    let lanes = 0x0000_00FF_0000_00FF;
    // Pairs 0 and 2 times 100 and 10^6, pairs 1 and 3 times 1 and 10^4, summed in the high
    // half.
    let high = (pairs & lanes).wrapping_mul(100 + (1_000_000 << 32));
    let low = ((pairs >> 16) & lanes).wrapping_mul(1 + (10_000 << 32));
    high.wrapping_add(low) >> 32
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that is zero; bits above the lowest one may be false
/// positives (borrows), the lowest one is exact.
#[inline(always)]
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// Bytes of a string looked at inline, 16 a round, before the rest is searched with
/// `memchr2` (whose call and set-up cost more than the inline rounds on short strings).
const INLINE_PLAIN: usize = 64;

/// The first index from `i` whose byte may end a plain run of a string (`"`, `\` or a
/// control character); the caller looks at that byte itself. The first [`INLINE_PLAIN`]
/// bytes are looked at eight at a time inline (most strings end there); a longer string is
/// searched for its quote or backslash with `memchr2` (vector instructions) and the run
/// before that checked for control characters in a loop the compiler vectorizes.
#[inline(always)]
fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
    let inline_end = i + INLINE_PLAIN;
    while let Some(chunk) = bytes.get(i..i + 16) {
        let (low, high) = chunk.split_at(8);
        let special = special_bytes(low);
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        let special = special_bytes(high);
        if special != 0 {
            return i + 8 + (special.trailing_zeros() / 8) as usize;
        }
        i += 16;
        if i >= inline_end {
            return skip_plain_long(bytes, i);
        }
    }
    skip_plain_short(bytes, i)
}

/// The last bytes of [`skip_plain`], fewer than 16: eight at a time while they last.
#[inline(always)]
fn skip_plain_short(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let special = special_bytes(chunk);
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// [`skip_plain`] past its first [`INLINE_PLAIN`] bytes.
#[inline(never)]
fn skip_plain_long(bytes: &[u8], i: usize) -> usize {
    let Some(rest) = bytes.get(i..) else {
        return i;
    };
    let end = memchr::memchr2(b'"', b'\\', rest).map_or(bytes.len(), |n| i + n);
    let run = bytes.get(i..end).unwrap_or_default();
    // The least byte of the run, with no early exit, so it vectorizes (a minimum per 16
    // bytes); a control character is rare (the record is refused), so it is looked for only
    // once the run holds one.
    if run.iter().fold(u8::MAX, |least, &b| least.min(b)) < 0x20 {
        return run.iter().position(|&b| b < 0x20).map_or(end, |n| i + n);
    }
    end
}

/// The high bit of each byte of the 8-byte `chunk` that may be `"`, `\\` or a control
/// character (exact for the lowest one, see [`zero_bytes`]).
#[inline(always)]
fn special_bytes(chunk: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    let word = u64::from_le_bytes(word);
    zero_bytes(word ^ (ONES * u64::from(b'"')))
        | zero_bytes(word ^ (ONES * u64::from(b'\\')))
        | (word.wrapping_sub(ONES * 0x20) & !word & HIGHS)
}

/// A JSON number in serde_json's three forms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Number {
    /// A non-negative integer (serde's `visit_u64`).
    Unsigned(u64),
    /// A negative integer that fits `i64` (serde's `visit_i64`).
    Negative(i64),
    /// Anything with a fraction or exponent, and `-0` (serde's `visit_f64`).
    Double(f64),
}

/// A cursor over one record's text.
pub(super) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    #[inline(always)]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips whitespace and returns the next byte (not consumed).
    #[inline(always)]
    pub(super) fn peek(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `byte` after whitespace.
    #[inline(always)]
    pub(super) fn eat(&mut self, byte: u8) -> Option<()> {
        if self.peek()? == byte {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    /// After a member or element: `true` on `,` (another follows), `false` on `close`.
    #[inline(always)]
    pub(super) fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.pos += 1;
                Some(true)
            }
            b if b == close => {
                self.pos += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// After `[` or `{`: `true` if the container is empty (its `close` consumed).
    #[inline(always)]
    pub(super) fn empty(&mut self, close: u8) -> Option<bool> {
        if self.peek()? == close {
            self.pos += 1;
            Some(true)
        } else {
            Some(false)
        }
    }

    /// `true` if only whitespace is left.
    pub(super) fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes the literal `word` (`null`, `true`, `false`) at the cursor.
    #[inline(always)]
    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos + word.len();
        if self.bytes().get(self.pos..end)? == word {
            self.pos = end;
            Some(())
        } else {
            None
        }
    }

    /// A string at the cursor (after whitespace), borrowed when it has no escapes.
    #[inline(always)]
    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.pos + 1;
        let bytes = self.bytes();
        let mut i = skip_plain(bytes, start);
        loop {
            match *bytes.get(i)? {
                b'"' => {
                    self.pos = i + 1;
                    return self.text.get(start..i).map(Cow::Borrowed);
                }
                b'\\' => return self.escaped(start, i),
                b if b < 0x20 => return None,
                _ => i += 1,
            }
        }
    }

    /// The rest of a string whose first escape is at `escape`.
    #[cold]
    fn escaped(&mut self, start: usize, mut escape: usize) -> Option<Cow<'a, str>> {
        let bytes = self.bytes();
        let mut out = String::with_capacity(escape - start + 16);
        out.push_str(self.text.get(start..escape)?);
        loop {
            // At a backslash.
            let decoded = match *bytes.get(escape + 1)? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                _ => return None,
            };
            out.push(decoded);
            let run = escape + 2;
            let mut i = skip_plain(bytes, run);
            loop {
                match *bytes.get(i)? {
                    b'"' => {
                        out.push_str(self.text.get(run..i)?);
                        self.pos = i + 1;
                        return Some(Cow::Owned(out));
                    }
                    b'\\' => break,
                    b if b < 0x20 => return None,
                    _ => i += 1,
                }
            }
            out.push_str(self.text.get(run..i)?);
            escape = i;
        }
    }

    /// A number at the cursor (after whitespace), in the form serde_json would give it.
    #[inline(always)]
    pub(super) fn number(&mut self) -> Option<Number> {
        self.peek()?;
        let bytes = self.bytes();
        let start = self.pos;
        let mut i = start;
        let negative = bytes.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let mut significand: u64 = match *bytes.get(i)? {
            b'0' => {
                i += 1;
                if bytes.get(i).is_some_and(u8::is_ascii_digit) {
                    return None; // a leading zero: serde_json's error
                }
                0
            }
            d @ b'1'..=b'9' => {
                i += 1;
                u64::from(d - b'0')
            }
            _ => return None,
        };
        (significand, i) = eight_digits_at_a_time(bytes, significand, i);
        while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
            significand = significand
                .checked_mul(10)?
                .checked_add(u64::from(d - b'0'))?;
            i += 1;
        }
        if !matches!(bytes.get(i), Some(b'.' | b'e' | b'E')) {
            self.pos = i;
            return Some(if !negative {
                Number::Unsigned(significand)
            } else {
                // serde_json: `-0` and integers below i64::MIN are doubles.
                let value = (significand as i64).wrapping_neg();
                if value >= 0 {
                    Number::Double(-(significand as f64))
                } else {
                    Number::Negative(value)
                }
            });
        }
        let mut exponent: i64 = 0;
        // More digits than a u64 holds: serde_json drops the rest, left to it.
        let mut overflow = false;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            let digits = i;
            let read;
            (significand, read) = eight_digits_at_a_time(bytes, significand, i);
            exponent -= (read - i) as i64;
            i = read;
            while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
                match significand
                    .checked_mul(10)
                    .and_then(|s| s.checked_add(u64::from(d - b'0')))
                {
                    Some(next) => significand = next,
                    None => overflow = true,
                }
                exponent -= 1;
                i += 1;
            }
            if i == digits {
                return None;
            }
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            let sign = match bytes.get(i) {
                Some(b'-') => {
                    i += 1;
                    -1
                }
                Some(b'+') => {
                    i += 1;
                    1
                }
                _ => 1,
            };
            let digits = i;
            let mut written: i64 = 0;
            while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
                written = written
                    .saturating_mul(10)
                    .saturating_add(i64::from(d - b'0'));
                i += 1;
            }
            if i == digits {
                return None;
            }
            exponent = exponent.saturating_add(sign * written);
        }
        self.pos = i;
        let power = usize::try_from(exponent.unsigned_abs()).unwrap_or(usize::MAX);
        let exact = EXACT
            .get(power)
            .filter(|_| significand <= 1 << 53 && !overflow);
        let value = match serde_powers().and_then(|p| p.get(power)) {
            // serde_json's own conversion (without `float_roundtrip`): the digits as a
            // double, times or divided by the double nearest the power of ten.
            Some(&pow) if !overflow => {
                let f = significand as f64;
                if exponent >= 0 {
                    Some(f * pow).filter(|v| v.is_finite())?
                } else {
                    f / pow
                }
            }
            // Exact digits and power, one rounding: what any correct conversion gives.
            _ if exact.is_some() => {
                let (f, pow) = (significand as f64, exact.copied().unwrap_or(1.0));
                if exponent >= 0 {
                    f * pow
                } else {
                    f / pow
                }
            }
            // Otherwise serde_json's own parse, so both paths agree: of the digits, without
            // the sign, which is applied below (parsing it too negated such a number twice).
            _ => serde_json::from_str::<f64>(self.text.get(start + usize::from(negative)..i)?)
                .ok()?,
        };
        Some(Number::Double(if negative { -value } else { value }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Option<Number> {
        let mut scanner = Scanner::new(text);
        let n = scanner.number()?;
        scanner.at_end().then_some(n)
    }

    /// What serde_json reads from `text`, in the same three forms.
    fn serde_number(text: &str) -> Option<Number> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let n = value.as_number()?;
        Some(if let Some(u) = n.as_u64() {
            Number::Unsigned(u)
        } else if let Some(i) = n.as_i64() {
            Number::Negative(i)
        } else {
            Number::Double(n.as_f64()?)
        })
    }

    #[test]
    fn numbers_read_as_serde_json_reads_them_or_not_at_all() {
        for text in [
            "0",
            "-0",
            "7",
            "-7",
            "18446744073709551615",
            "-9223372036854775808",
            "-9223372036854775809",
            "1.5",
            "-2.25e3",
            "3.0",
            "1e3",
            "1E+2",
            "1e-7",
            "0.1",
            "123456789.123456789",
            "1e400",
            "1.7976931348623157e308",
            "5e-324",
            "0.30000000000000004",
            "9007199254740993.0",
            "74187060.866652760",
            "7236830840615796.5",
            "-0.12345678901234567",
            "1234.5678901234567e-300",
            "98765432109876543.21e250",
            "12345678901234567890.5",
            "-0.20000000000000000000",
            "-3.14159265358979323846",
        ] {
            if let Some(ours) = number(text) {
                let theirs = serde_number(text).expect("serde_json reads it");
                match (ours, theirs) {
                    (Number::Double(a), Number::Double(b)) => {
                        assert_eq!(a.to_bits(), b.to_bits(), "{text}")
                    }
                    (a, b) => assert_eq!(a, b, "{text}"),
                }
            }
        }
        for bad in ["01", "-", "1.", ".5", "1e", "+1", "-a", "1.e3"] {
            assert_eq!(number(bad), None, "{bad}");
        }
    }

    #[test]
    fn eight_digits_make_their_number() {
        for text in ["00000000", "12345678", "99999999", "10000001", "07060504"] {
            let word = u64::from_le_bytes(*text.as_bytes().first_chunk().expect("8 bytes"));
            assert_eq!(
                eight_digits(word),
                text.parse::<u64>().expect("digits"),
                "{text}"
            );
        }
    }

    proptest::proptest! {
        /// A plain run of every length around the inline bytes, then one byte of any value
        /// (a quote, a backslash, a control character, or a plain one), then a few random
        /// bytes: `skip_plain`, from anywhere in the run, stops at the first special byte or
        /// up to seven bytes before the end, and never past a special byte.
        #[test]
        fn skip_plain_stops_at_the_first_special_byte(
            run in 0usize..300,
            byte: u8,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..20),
            start in 0usize..300,
        ) {
            let mut bytes = vec![b'x'; run];
            bytes.push(byte);
            bytes.extend(&tail);
            let start = start % (run + 1);
            let first = bytes[start..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(bytes.len(), |n| start + n);
            let stop = skip_plain(&bytes, start);
            proptest::prop_assert!(stop <= first, "{stop} past the special byte at {first}");
            proptest::prop_assert!(
                stop == first || bytes.len() - stop < 8,
                "{stop} short of {first} with {} bytes left",
                bytes.len() - stop
            );
        }
    }

    proptest::proptest! {
        /// Digits of every length around the 8-digit rounds and u64's 20, with or without a
        /// fraction and an exponent: read as serde_json reads them, or left to it.
        #[test]
        fn digit_runs_read_as_serde_json_reads_them(
            negative: bool,
            whole in "[1-9][0-9]{0,24}|0",
            fraction in proptest::option::of("[0-9]{1,26}"),
            exponent in proptest::option::of(-330i32..330),
            tail in "[ ,}x.]?",
        ) {
            let mut text = format!("{}{whole}", if negative { "-" } else { "" });
            if let Some(f) = &fraction {
                text.push('.');
                text.push_str(f);
            }
            if let Some(e) = exponent {
                text.push_str(&format!("e{e}"));
            }
            let mut scanner = Scanner::new(&text);
            let read = scanner.number();
            if let Some(ours) = read {
                // The scanner stops after the number's last digit.
                proptest::prop_assert!(scanner.at_end(), "{text}");
                let theirs = serde_number(&text);
                proptest::prop_assert!(theirs.is_some(), "{text}");
                match (ours, theirs.unwrap_or(Number::Unsigned(0))) {
                    (Number::Double(a), Number::Double(b)) => {
                        proptest::prop_assert_eq!(a.to_bits(), b.to_bits(), "{}", text)
                    }
                    (a, b) => proptest::prop_assert_eq!(a, b, "{}", text),
                }
            }
            // With a byte after it, the number ends at the same place.
            let followed = format!("{text}{tail}");
            let mut scanner = Scanner::new(&followed);
            if let (Some(alone), Some(then)) = (read, scanner.number()) {
                proptest::prop_assert_eq!(format!("{alone:?}"), format!("{then:?}"));
            }
        }
    }

    #[test]
    fn strings_are_borrowed_unless_escaped_and_doubtful_ones_are_refused() {
        let mut s = Scanner::new(r#" "plain" "a\"b\\c\/d\n" "\u0041" "#);
        assert!(matches!(s.string(), Some(Cow::Borrowed("plain"))));
        assert_eq!(s.string().as_deref(), Some("a\"b\\c/d\n"));
        assert_eq!(s.string(), None);
        assert_eq!(Scanner::new("\"a\u{1}\"").string(), None);
        assert_eq!(Scanner::new("\"open").string(), None);
        // Runs shorter and longer than the inline 64 bytes (longer ones take memchr), the
        // special byte at every position of one.
        for at in 0..300 {
            let mut text = "x".repeat(300);
            text.insert(at, '"');
            let quoted = format!("\"{text}\"");
            assert_eq!(Scanner::new(&quoted).string().as_deref(), Some(&text[..at]));
            let mut bad = "é".repeat(150);
            bad.insert(at / 2 * 2, '\u{1f}');
            assert_eq!(Scanner::new(&format!("\"{bad}\"")).string(), None, "{at}");
            let mut escaped = "x".repeat(300);
            escaped.insert_str(at, "\\t");
            let expected = escaped.replace("\\t", "\t");
            let text = format!("\"{escaped}\"");
            assert_eq!(Scanner::new(&text).string().as_deref(), Some(&expected[..]));
            let open = format!("\"{}", "x".repeat(at));
            assert_eq!(Scanner::new(&open).string(), None, "{at}");
        }
    }
}
