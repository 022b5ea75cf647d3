//! The deterministic "model": words from a fixed vocabulary, picked by a
//! PRNG seeded from the model digest, the prompt and the request's seed.
//!
//! The same (model file, prompt, seed) always gives the same words, on every
//! engine and every run; `temperature` and the other sampling knobs are
//! accepted by the routes and have no effect.

mod vocabulary;

use sha2::{Digest, Sha256};

pub use vocabulary::VOCABULARY;

use crate::prompt::Prompt;

/// Dimension of `/v1/embeddings` vectors.
pub const EMBEDDING_DIMENSION: usize = 64;

/// Seeds are derived under versioned domain tags so that a chat prompt, a
/// completion prompt and an embedding input never share a stream by accident,
/// and so that a future change of derivation can say so.
const GENERATE_TAG: &[u8] = b"switchyard-reference/generate/v1";
const EMBED_TAG: &[u8] = b"switchyard-reference/embed/v1";

/// Picks the words of one completion.
#[derive(Debug, Clone)]
pub struct Generator {
    rng: SplitMix64,
}

impl Generator {
    /// The generator for `prompt` on the model with digest `model`.
    pub fn new(model: &[u8; 32], prompt: &Prompt, seed: Option<i64>) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(GENERATE_TAG);
        hasher.update(model);
        match prompt {
            Prompt::Chat(messages) => {
                hasher.update(b"chat");
                for message in messages {
                    update_framed(&mut hasher, message.role.as_bytes());
                    update_framed(&mut hasher, message.content.as_bytes());
                }
            }
            Prompt::Text(text) => {
                hasher.update(b"text");
                update_framed(&mut hasher, text.as_bytes());
            }
        }
        match seed {
            Some(seed) => {
                hasher.update([1]);
                hasher.update(seed.to_le_bytes());
            }
            None => hasher.update([0]),
        }
        Self {
            rng: SplitMix64::from_digest(&hasher.finalize().into()),
        }
    }

    /// The next word (without surrounding space).
    pub fn next_word(&mut self) -> &'static str {
        VOCABULARY[usize::from(self.rng.next_u64().to_be_bytes()[0])]
    }
}

/// The embedding of `input`: a unit-norm vector of [`EMBEDDING_DIMENSION`]
/// components, the same for the same model and input.
pub fn embedding(model: &[u8; 32], input: &str) -> Vec<f32> {
    let mut hasher = Sha256::new();
    hasher.update(EMBED_TAG);
    hasher.update(model);
    update_framed(&mut hasher, input.as_bytes());
    let mut rng = SplitMix64::from_digest(&hasher.finalize().into());
    let mut vector: Vec<f32> = (0..EMBEDDING_DIMENSION)
        .map(|_| rng.next_unit() * 2.0 - 1.0)
        .collect();
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    } else {
        // Sixty-four zeros from a PRNG do not happen; keep the unit norm anyway.
        vector[0] = 1.0;
    }
    vector
}

/// Length-prefixes a field so that ("ab", "c") and ("a", "bc") hash apart.
fn update_framed(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// SplitMix64: tiny, fast, and good enough to pick words.
#[derive(Debug, Clone)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn from_digest(digest: &[u8; 32]) -> Self {
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Self {
            state: u64::from_le_bytes(first),
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in `[0, 1)` from the top 24 bits (an f32's precision).
    fn next_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u32 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(generator: &mut Generator, n: usize) -> Vec<&'static str> {
        (0..n).map(|_| generator.next_word()).collect()
    }

    #[test]
    fn same_inputs_give_the_same_words() {
        let prompt = Prompt::Text("once upon a time".into());
        let a = words(&mut Generator::new(&[7; 32], &prompt, Some(3)), 32);
        let b = words(&mut Generator::new(&[7; 32], &prompt, Some(3)), 32);
        assert_eq!(a, b);
    }

    #[test]
    fn model_prompt_and_seed_each_change_the_words() {
        let prompt = Prompt::Text("once upon a time".into());
        let base = words(&mut Generator::new(&[7; 32], &prompt, None), 32);
        let other_model = words(&mut Generator::new(&[8; 32], &prompt, None), 32);
        let other_prompt = words(
            &mut Generator::new(&[7; 32], &Prompt::Text("once upon".into()), None),
            32,
        );
        let seeded = words(&mut Generator::new(&[7; 32], &prompt, Some(0)), 32);
        assert_ne!(base, other_model);
        assert_ne!(base, other_prompt);
        assert_ne!(base, seeded);
    }

    #[test]
    fn embeddings_are_unit_norm_deterministic_and_input_dependent() {
        let a = embedding(&[1; 32], "hello");
        assert_eq!(a.len(), EMBEDDING_DIMENSION);
        let norm = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert_eq!(a, embedding(&[1; 32], "hello"));
        assert_ne!(a, embedding(&[1; 32], "hello!"));
        assert_ne!(a, embedding(&[2; 32], "hello"));
    }
}
