//! Reads the safetensors format: an 8-byte little-endian header length, a JSON header naming
//! each tensor's dtype, shape and byte range, then the raw data. F32, F16 and BF16 tensors
//! are read (half precision is widened to f32 at load).

use std::collections::HashMap;

use crate::EmbedError;

#[derive(Debug, Clone, serde::Deserialize)]
pub struct TensorInfo {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub data_offsets: (usize, usize),
}

/// A parsed file: the header and the bytes behind it.
pub struct Tensors {
    infos: HashMap<String, TensorInfo>,
    data: Vec<u8>,
}

impl Tensors {
    pub fn parse(mut bytes: Vec<u8>) -> Result<Tensors, EmbedError> {
        let invalid = |why: String| EmbedError::ModelInvalid(format!("model.safetensors: {why}"));
        let header_len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| invalid("the file is shorter than its header".into()))?;
        let header_end = usize::try_from(header_len)
            .ok()
            .and_then(|len| len.checked_add(8))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| invalid(format!("header length {header_len} is past the end of the file (truncated?)")))?;
        let header: HashMap<String, serde_json::Value> = serde_json::from_slice(&bytes[8..header_end])
            .map_err(|e| invalid(format!("the header is not valid JSON: {e}")))?;
        let data_len = bytes.len() - header_end;
        let mut infos = HashMap::new();
        for (name, value) in header {
            if name == "__metadata__" {
                continue;
            }
            let info: TensorInfo = serde_json::from_value(value).map_err(|e| invalid(format!("tensor {name}: {e}")))?;
            let (start, end) = info.data_offsets;
            if start > end || end > data_len {
                return Err(invalid(format!("tensor {name} lies past the end of the file (truncated?)")));
            }
            infos.insert(name.strip_prefix("bert.").map(str::to_owned).unwrap_or(name), info);
        }
        bytes.drain(..header_end);
        Ok(Tensors { infos, data: bytes })
    }

    /// The tensor `name` as f32 values, checked to have `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let invalid = |why: String| EmbedError::ModelInvalid(format!("model.safetensors: tensor {name}: {why}"));
        let info = self.infos.get(name).ok_or_else(|| invalid("missing".into()))?;
        if info.shape != shape {
            return Err(invalid(format!("shape {:?}, expected {shape:?} (config.json disagrees?)", info.shape)));
        }
        let count: usize = shape.iter().product();
        let bytes = &self.data[info.data_offsets.0..info.data_offsets.1];
        let width = match info.dtype.as_str() {
            "F32" => 4,
            "F16" | "BF16" => 2,
            other => return Err(invalid(format!("dtype {other} is not supported (F32, F16, BF16 are)"))),
        };
        if bytes.len() != count * width {
            return Err(invalid(format!("{} bytes for {count} values of {}", bytes.len(), info.dtype)));
        }
        Ok(match info.dtype.as_str() {
            "F32" => bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect(),
            "F16" => bytes.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
            _ => bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
        })
    }
}

/// IEEE 754 half → single precision, subnormals and infinities included.
fn f16_to_f32(h: u16) -> f32 {
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

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn reads_f32_and_f16_tensors() {
        let mut data = 1.5f32.to_le_bytes().to_vec();
        data.extend_from_slice(&(-2.0f32).to_le_bytes());
        data.extend_from_slice(&0x3c00u16.to_le_bytes()); // 1.0 in f16
        data.extend_from_slice(&0xc100u16.to_le_bytes()); // -2.5 in f16
        let header = r#"{"__metadata__":{"format":"pt"},"bert.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]}}"#;
        let tensors = Tensors::parse(file(header, &data)).unwrap();
        assert_eq!(tensors.get("a", &[2]).unwrap(), vec![1.5, -2.0]);
        assert_eq!(tensors.get("b", &[1, 2]).unwrap(), vec![1.0, -2.5]);
        assert!(tensors.get("b", &[2]).unwrap_err().to_string().contains("shape"));
        assert!(tensors.get("c", &[1]).unwrap_err().to_string().contains("missing"));
    }

    #[test]
    fn truncated_files_are_refused() {
        let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert!(Tensors::parse(file(header, &[0; 4])).is_err());
        assert!(Tensors::parse(vec![1, 2, 3]).is_err());
        assert!(Tensors::parse(file("{not json", &[])).is_err());
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(Tensors::parse(huge).is_err());
    }

    #[test]
    fn half_precision_edge_values() {
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x8000), -0.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
    }
}
