//! Avro values whose column form is computed, not copied: `decimal` (a big-endian two's
//! complement unscaled integer and the schema's scale) as exact decimal text.

use crate::error::DecodeErrorKind;

/// The decimal `bytes` (big-endian two's complement) with `scale` digits after the point,
/// as text: `-12.30`, `0.05`, `7`. Values wider than 128 bits are refused.
pub(crate) fn decimal_text(bytes: &[u8], scale: usize) -> Result<String, DecodeErrorKind> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xFF } else { 0x00 };
    // Leading sign-extension bytes beyond 16 carry nothing.
    let mut significant = bytes;
    while significant.len() > 16 {
        match significant.split_first() {
            Some((first, rest)) if *first == fill => significant = rest,
            _ => {
                return Err(DecodeErrorKind::DecimalTooWide { len: bytes.len() });
            }
        }
    }
    let mut wide = [fill; 16];
    let at = 16 - significant.len();
    if let Some(tail) = wide.get_mut(at..) {
        tail.copy_from_slice(significant);
    }
    let value = i128::from_be_bytes(wide);
    let digits = value.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + scale + 3);
    if value < 0 {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&digits);
    } else if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', scale - digits.len()));
        out.push_str(&digits);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_render_exactly() {
        assert_eq!(decimal_text(&[0x04, 0xCE], 2).as_deref(), Ok("12.30"));
        assert_eq!(decimal_text(&[0xFB, 0x32], 2).as_deref(), Ok("-12.30"));
        assert_eq!(decimal_text(&[0x05], 3).as_deref(), Ok("0.005"));
        assert_eq!(decimal_text(&[], 0).as_deref(), Ok("0"));
        assert_eq!(decimal_text(&[0x07], 0).as_deref(), Ok("7"));
        let mut wide = vec![0xFF; 4];
        wide.extend_from_slice(&(-5i128).to_be_bytes());
        assert_eq!(decimal_text(&wide, 1).as_deref(), Ok("-0.5"));
        assert_eq!(
            decimal_text(&[0x01; 17], 0),
            Err(DecodeErrorKind::DecimalTooWide { len: 17 })
        );
    }
}
