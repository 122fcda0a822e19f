//! Random numbers on the GPU: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
//! 1, 2, 3", SC'11), a counter-based generator, and its state as the language sees it.
//!
//! Counter-based means element block `j` of a draw is `philox(counter = offset + j, key = seed)`:
//! every thread computes its own numbers with no shared state, and the only state between draws
//! is the counter offset, which [`GpuRng`] advances by the number of blocks each draw used. The
//! RNG variable of the language still serializes random ops (each reads and advances the
//! offset), so a seeded script gives the same GPU numbers on every policy and stream count.
//!
//! The same function is written here in Rust (the reference the GPU tests compare against, bit
//! for bit for `rand`) and in the kernel source (`philox4x32` in `source.rs`).

/// Philox's multipliers and Weyl key increments (Random123's `PHILOX_M4x32_*`, `PHILOX_W32_*`).
pub(crate) const M0: u32 = 0xD251_1F53;
pub(crate) const M1: u32 = 0xCD9E_8D57;
pub(crate) const W0: u32 = 0x9E37_79B9;
pub(crate) const W1: u32 = 0xBB67_AE85;

/// The GPU generator's state: a key (the seed) and the counter offset of the next draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuRng {
    seed: u64,
    next_block: u64,
}

/// Where one draw reads the Philox stream: the key and the first counter block. Block `j` gives
/// elements `4j .. 4j+4` of the draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    /// The Philox key (the seed).
    pub seed: u64,
    /// The counter of the draw's first block.
    pub first_block: u64,
}

impl GpuRng {
    /// A generator for `seed` (what `seed N` sets), at the start of its stream.
    pub fn seeded(seed: u64) -> GpuRng {
        GpuRng {
            seed,
            next_block: 0,
        }
    }

    /// Reserves the counters for a draw of `n` numbers and advances past them.
    pub fn draw(&mut self, n: usize) -> Draw {
        let draw = Draw {
            seed: self.seed,
            first_block: self.next_block,
        };
        self.next_block = self.next_block.wrapping_add((n as u64).div_ceil(4));
        draw
    }
}

/// One Philox4x32 round.
fn round(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let p0 = u64::from(M0) * u64::from(ctr[0]);
    let p1 = u64::from(M1) * u64::from(ctr[2]);
    let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
    let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
    [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0]
}

/// Philox4x32 with 10 rounds.
pub(crate) fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    ctr = round(ctr, key);
    for _ in 1..10 {
        key = [key[0].wrapping_add(W0), key[1].wrapping_add(W1)];
        ctr = round(ctr, key);
    }
    ctr
}

/// The four raw words of counter block `block` under `seed`.
pub(crate) fn block_words(seed: u64, block: u64) -> [u32; 4] {
    philox4x32_10(
        [block as u32, (block >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// A uniform `f32` in `[0, 1)` from the top 24 bits, as the CPU generator converts.
pub(crate) fn uniform(word: u32) -> f32 {
    (word >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// The host reference of the `rand_philox` kernel: `n` uniforms of `draw`.
pub fn reference_uniform(draw: Draw, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| uniform(block_words(draw.seed, draw.first_block + (i / 4) as u64)[i % 4]))
        .collect()
}

/// The host reference of the `randn_philox` kernel: Box-Muller on word pairs, in `f32` as the
/// kernel computes (the device's `logf`/`sincosf` differ by a few ulp, so compare with a
/// tolerance).
pub fn reference_normal(draw: Draw, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let words = block_words(draw.seed, draw.first_block + (i / 4) as u64);
            let pair = (i % 4) / 2 * 2;
            let u1 = 1.0 - uniform(words[pair]);
            let u2 = uniform(words[pair + 1]);
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = std::f32::consts::TAU * u2;
            if i % 2 == 0 {
                r * theta.cos()
            } else {
                r * theta.sin()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_random123_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn draws_advance_the_counter_so_streams_continue() {
        let mut rng = GpuRng::seeded(7);
        let first = rng.draw(6);
        let second = rng.draw(4);
        assert_eq!(first.first_block, 0);
        assert_eq!(second.first_block, 2, "6 numbers use two blocks of four");
        let together = reference_uniform(GpuRng::seeded(7).draw(12), 12);
        assert_eq!(reference_uniform(first, 6), &together[..6]);
        assert_eq!(reference_uniform(second, 4), &together[8..]);
        assert_ne!(
            reference_uniform(GpuRng::seeded(8).draw(4), 4),
            together[..4]
        );
    }

    #[test]
    fn reference_distributions_look_right() {
        let draw = GpuRng::seeded(42).draw(100_000);
        let u = reference_uniform(draw, 100_000);
        assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = u.iter().map(|&v| f64::from(v)).sum::<f64>() / 1e5;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let z = reference_normal(draw, 100_000);
        let mean = z.iter().map(|&v| f64::from(v)).sum::<f64>() / 1e5;
        let var = z
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / 1e5;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        assert!(z.iter().all(|v| v.is_finite()));
    }
}
