//! Sampling at a temperature above 0: the next token drawn from the softmax of the logits over
//! the temperature, with a seeded generator so a seed gives the same answer again. It draws
//! exactly as candle-transformers' `LogitsProcessor` with `Sampling::All` did (the same
//! softmax, generator and weighted index), so seeded answers did not change when cairn stopped
//! linking that crate. Temperature 0 never samples: the provider takes the likeliest token.

use candle_core::{Device, Tensor};
use rand::SeedableRng;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::StdRng;

pub(crate) struct Sampler {
    rng: StdRng,
    temperature: f64,
}

impl Sampler {
    pub(crate) fn new(seed: u64, temperature: f64) -> Self {
        Self { rng: StdRng::seed_from_u64(seed), temperature }
    }

    /// A token drawn in proportion to its probability at the sampler's temperature.
    pub(crate) fn sample(&mut self, logits: &[f32]) -> candle_core::Result<u32> {
        let scaled = (Tensor::new(logits, &Device::Cpu)? / self.temperature)?;
        let probabilities: Vec<f32> = candle_nn::ops::softmax_last_dim(&scaled)?.to_vec1()?;
        let index = WeightedIndex::new(&probabilities).map_err(candle_core::Error::wrap)?;
        Ok(index.sample(&mut self.rng) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_tokens_again() {
        let logits = [0.5, 1.0, 0.2, 0.9, 0.7, 0.1];
        let draw = |seed| {
            let mut sampler = Sampler::new(seed, 1.0);
            (0..32).map(|_| sampler.sample(&logits).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8), "another seed, another draw");
    }

    #[test]
    fn a_low_temperature_draws_the_likeliest_token() {
        let mut sampler = Sampler::new(1, 0.01);
        let logits = [0.0, 3.0, 1.0, 2.9];
        assert!((0..50).all(|_| sampler.sample(&logits).unwrap() == 1));
    }

    /// The draws of candle-transformers' `LogitsProcessor` (`Sampling::All`), which the local
    /// provider used before this sampler: a seed keeps its answers.
    #[test]
    fn draws_as_candles_logits_processor() {
        use candle_transformers::generation::{LogitsProcessor, Sampling};
        let logits: Vec<f32> = (0..500).map(|i| ((i * 7919) % 113) as f32 / 17.0).collect();
        for (seed, temperature) in [(299_792_458, 0.7), (1, 1.0), (42, 0.2)] {
            let mut ours = Sampler::new(seed, temperature);
            let mut theirs = LogitsProcessor::from_sampling(seed, Sampling::All { temperature });
            let tensor = Tensor::new(logits.as_slice(), &Device::Cpu).unwrap();
            for _ in 0..64 {
                assert_eq!(ours.sample(&logits).unwrap(), theirs.sample(&tensor).unwrap());
            }
        }
    }
}
