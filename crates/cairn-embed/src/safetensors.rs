//! Model weights from a safetensors file, read with Hugging Face's `safetensors` crate (which
//! checks the header, the offsets and that the data covers the file exactly). This module adds
//! what the encoder needs on top: tensors looked up with or without the `bert.` (or
//! `roberta.`) prefix some
//! exports carry, shapes checked against `config.json`, and F32, F16 or BF16 data widened to
//! f32 at load. Every failure is an [`EmbedError::ModelInvalid`] naming the file.

use safetensors::{Dtype, SafeTensorError, SafeTensors};

use crate::EmbedError;

/// The parsed file, borrowing the bytes read from disk.
pub struct Tensors<'data> {
    file: SafeTensors<'data>,
}

impl<'data> Tensors<'data> {
    pub fn parse(bytes: &'data [u8]) -> Result<Tensors<'data>, EmbedError> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| invalid(file_error(&e, bytes.len())))?;
        Ok(Tensors { file })
    }

    /// The shape of the tensor `name`.
    pub fn shape(&self, name: &str) -> Result<Vec<usize>, EmbedError> {
        let view = self.file.tensor(name).map_err(|_| invalid(format!("tensor {name}: missing")))?;
        Ok(view.shape().to_vec())
    }

    /// The tensor `name` as f32 values, checked to have `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        self.values(name, shape, |v| v)
    }

    /// The same as f16 bits, rounded to nearest even, without an f32 copy of the whole tensor
    /// on the way (EmbeddingGemma's token table is 805 MB as f32, 403 MB as f16).
    pub fn get_f16(&self, name: &str, shape: &[usize]) -> Result<Vec<u16>, EmbedError> {
        self.values(name, shape, f32_to_f16)
    }

    /// The tensor `name`, checked to have `shape`, each value widened to f32 then `convert`ed.
    fn values<T>(&self, name: &str, shape: &[usize], convert: impl Fn(f32) -> T) -> Result<Vec<T>, EmbedError> {
        let invalid = |why: String| invalid(format!("tensor {name}: {why}"));
        let view = self
            .file
            .tensor(name)
            .or_else(|_| self.file.tensor(&format!("bert.{name}")))
            .or_else(|_| self.file.tensor(&format!("roberta.{name}")))
            .map_err(|_| invalid("missing".into()))?;
        if view.shape() != shape {
            return Err(invalid(format!("shape {:?}, expected {shape:?} (config.json disagrees?)", view.shape())));
        }
        // The crate has checked that the bytes match shape and dtype, so the widths hold.
        let bytes = view.data();
        match view.dtype() {
            Dtype::F32 => {
                Ok(bytes.chunks_exact(4).map(|b| convert(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect())
            }
            Dtype::F16 => Ok(halves(bytes).map(|h| convert(f16_to_f32(h))).collect()),
            Dtype::BF16 => Ok(halves(bytes).map(|h| convert(f32::from_bits(u32::from(h) << 16))).collect()),
            other => Err(invalid(format!("dtype {other:?} is not supported (F32, F16, BF16 are)"))),
        }
    }
}

fn invalid(why: String) -> EmbedError {
    EmbedError::ModelInvalid(format!("model.safetensors: {why}"))
}

/// Why the file as a whole was refused, in words that point at the likely cause: a download
/// cut short, or a file of another format (PyTorch's pickle, GGUF) under the expected name.
fn file_error(error: &SafeTensorError, len: usize) -> String {
    match error {
        SafeTensorError::HeaderTooSmall
        | SafeTensorError::InvalidHeaderLength
        | SafeTensorError::MetadataIncompleteBuffer => {
            format!("{error}: the {len}-byte file does not hold what its header describes (truncated?)")
        }
        SafeTensorError::HeaderTooLarge
        | SafeTensorError::InvalidHeader(_)
        | SafeTensorError::InvalidHeaderDeserialization(_) => {
            format!("{error}: not a safetensors file (another format under this name?)")
        }
        other => other.to_string(),
    }
}

/// Little-endian 16-bit words.
fn halves(bytes: &[u8]) -> impl Iterator<Item = u16> + '_ {
    bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

/// f32 → IEEE half, rounded to nearest even (overflow to infinity, underflow through the
/// subnormals to zero).
pub(crate) fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exponent == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let e = exponent - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mantissa | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let mut out = ((e as u32) << 10) | (mantissa >> 13);
    let rest = mantissa & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1; // may carry into the exponent, which is the right rounding
    }
    sign | out as u16
}

/// IEEE 754 half → single precision, subnormals and infinities included.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value = m · 2⁻²⁴.
            let value = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -value } else { value };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_round_trips_and_rounds_to_nearest() {
        for h in (0u16..=0xffff).filter(|h| (h >> 10) & 0x1f != 0x1f) {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h, "{h:#x}");
        }
        // One f16 step at 1.0 is 2⁻¹⁰: halfway cases go to the even neighbour.
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 4096.0), 0x3c01);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(1e-9), 0);
        assert_eq!(f32_to_f16(f32::NAN) & 0x7e00, 0x7e00);
        let v = 0.123_456_7f32;
        assert!((f16_to_f32(f32_to_f16(v)) - v).abs() < v / 2048.0);
    }

    fn file(header: impl AsRef<[u8]>, data: &[u8]) -> Vec<u8> {
        let header = header.as_ref();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(data);
        bytes
    }

    fn error(bytes: &[u8]) -> String {
        match Tensors::parse(bytes) {
            Ok(_) => panic!("parsed"),
            Err(e) => {
                assert!(matches!(e, EmbedError::ModelInvalid(_)), "{e:?}");
                e.to_string()
            }
        }
    }

    /// `a` (F32, `bert.` prefix), `b` (F16), `c` (BF16) and `d` (I32).
    fn sample() -> Vec<u8> {
        let mut data = 1.5f32.to_le_bytes().to_vec();
        data.extend_from_slice(&(-2.0f32).to_le_bytes());
        data.extend_from_slice(&0x3c00u16.to_le_bytes()); // 1.0 in f16
        data.extend_from_slice(&0xc100u16.to_le_bytes()); // -2.5 in f16
        data.extend_from_slice(&0x3fc0u16.to_le_bytes()); // 1.5 in bf16
        data.extend_from_slice(&7i32.to_le_bytes());
        let header = r#"{"__metadata__":{"format":"pt"},
            "bert.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "b":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]},
            "c":{"dtype":"BF16","shape":[1],"data_offsets":[12,14]},
            "d":{"dtype":"I32","shape":[1],"data_offsets":[14,18]}}"#;
        file(header, &data)
    }

    #[test]
    fn reads_f32_f16_and_bf16_tensors() {
        let bytes = sample();
        let tensors = Tensors::parse(&bytes).unwrap();
        assert_eq!(tensors.get("a", &[2]).unwrap(), vec![1.5, -2.0]);
        assert_eq!(tensors.get("b", &[1, 2]).unwrap(), vec![1.0, -2.5]);
        assert_eq!(tensors.get("c", &[1]).unwrap(), vec![1.5]);
    }

    #[test]
    fn a_wrong_shape_dtype_or_name_is_named() {
        let bytes = sample();
        let tensors = Tensors::parse(&bytes).unwrap();
        let err = tensors.get("b", &[2]).unwrap_err().to_string();
        assert!(err.contains("tensor b: shape [1, 2], expected [2]"), "{err}");
        let err = tensors.get("d", &[1]).unwrap_err().to_string();
        assert!(err.contains("tensor d: dtype I32 is not supported"), "{err}");
        let err = tensors.get("e", &[1]).unwrap_err().to_string();
        assert!(err.contains("tensor e: missing"), "{err}");
    }

    #[test]
    fn truncated_files_are_refused() {
        let whole = sample();
        for cut in [whole.len() - 1, whole.len() / 2, 20, 7, 0] {
            let err = error(&whole[..cut]);
            assert!(err.contains("truncated"), "cut at {cut}: {err}");
        }
        let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert!(error(&file(header, &[0; 4])).contains("truncated"));
    }

    #[test]
    fn foreign_files_are_refused() {
        // A PyTorch checkpoint is a zip archive: its first 8 bytes read as a huge length.
        let err = error(b"PK\x03\x04\x14\x00\x00\x00\x08\x00rest of a zip");
        assert!(err.contains("not a safetensors file"), "{err}");
        assert!(error(&file("{not json", &[])).contains("not a safetensors file"));
        assert!(error(&file([0xff, 0xfe], &[])).contains("not a safetensors file"));
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(error(&huge).contains("not a safetensors file"));
    }

    #[test]
    fn inconsistent_headers_are_refused() {
        // Shape and byte range disagree.
        let header = r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
        error(&file(header, &[0; 8]));
        // Overlapping ranges.
        let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#;
        error(&file(header, &[0; 12]));
    }

    #[test]
    fn half_precision_edge_values() {
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x8000), -0.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
    }
}
