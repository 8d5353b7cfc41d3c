//! Compression of cached entries with a dictionary of what they look like.
//!
//! A cached child is a few hundred bytes of JSON, most of it the same keys
//! and values every cluster's children have (label keys, owner references,
//! port and probe names). Compressed alone, such an object barely shrinks;
//! compressed with zstd against a dictionary that already holds those
//! strings, it shrinks about eightfold (8.3 KB of a cluster's children to
//! about 1.1 KB). The dictionary, `dictionary.jsonl`, is the JSON of the
//! children the builders make for an example cluster, trimmed as the caches
//! trim them, and an example cluster, one object a line. It is built into
//! the binary, and nothing compressed is kept beyond the process, so an
//! entry is always read with the dictionary it was written with.
//!
//! The file is checked in rather than made at start so that this codec
//! depends on nothing above it; `tests/cache_dictionary.rs` keeps it equal
//! to what the builders make (and rewrites it with
//! `TUSK_WRITE_DICTIONARY=1`).
//!
//! Level 1 keeps the dictionary's tables small (tens of KiB; level 3's are
//! most of a MiB) for a few percent less compression.

use std::sync::OnceLock;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

/// The dictionary's content: JSON objects, one a line.
const CONTENT: &[u8] = include_bytes!("dictionary.jsonl");

const LEVEL: i32 = 1;

struct Dictionaries {
    encoder: EncoderDictionary<'static>,
    decoder: DecoderDictionary<'static>,
}

fn dictionaries() -> &'static Dictionaries {
    static DICTIONARIES: OnceLock<Dictionaries> = OnceLock::new();
    DICTIONARIES.get_or_init(|| Dictionaries {
        encoder: EncoderDictionary::copy(CONTENT, LEVEL),
        decoder: DecoderDictionary::copy(CONTENT),
    })
}

/// `json` compressed; `None` when zstd refuses (the entry then stays JSON).
pub fn compress(json: &[u8]) -> Option<Vec<u8>> {
    let mut compressor = Compressor::with_prepared_dictionary(&dictionaries().encoder).ok()?;
    compressor.include_checksum(false).ok()?;
    compressor.include_contentsize(false).ok()?;
    compressor.include_dictid(false).ok()?;
    compressor.compress(json).ok()
}

/// The JSON `compressed` holds, `length` bytes long.
pub fn decompress(compressed: &[u8], length: usize) -> Result<Vec<u8>, String> {
    let mut decompressor = Decompressor::with_prepared_dictionary(&dictionaries().decoder)
        .map_err(|e| e.to_string())?;
    decompressor
        .decompress(compressed, length)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_comes_back_as_it_was_compressed() {
        let json = br#"{"metadata":{"labels":{"tusk.dev/cluster":"shop"}},"spec":{"ports":[]}}"#;
        let compressed = compress(json).expect("compressed");
        assert!(compressed.len() < json.len(), "{} bytes", compressed.len());
        assert_eq!(
            decompress(&compressed, json.len()).expect("decompressed"),
            json
        );
        assert!(
            decompress(&compressed, json.len() - 1).is_err(),
            "a wrong length is refused"
        );
        assert!(decompress(b"not zstd", json.len()).is_err());
    }
}
