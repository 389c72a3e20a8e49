//! The reference's epoch shuffle, reproduced bit for bit.
//!
//! The reference runs a linear congruential generator in JavaScript numbers: the multiply and the
//! add happen in float64 (losing precision once the product passes 2^53) and the `&` applies
//! ECMAScript ToInt32. Integer arithmetic would give other orders, so every step here is done in
//! f64 exactly as a JS engine does it.

const MULTIPLIER: f64 = 1_103_515_245.0;
const INCREMENT: f64 = 12_345.0;
const MASK: i32 = 0x7fff_ffff;
const DIVISOR: f64 = 2_147_483_647.0;

/// ECMAScript ToInt32: NaN and infinities become 0; otherwise truncate toward zero and wrap
/// modulo 2^32 into the signed range.
fn to_int32(x: f64) -> i32 {
    if !x.is_finite() {
        return 0;
    }
    let wrapped = x.trunc() % 4_294_967_296.0;
    let unsigned = if wrapped < 0.0 {
        wrapped + 4_294_967_296.0
    } else {
        wrapped
    };
    // `unsigned` is an integer in [0, 2^32), so the conversion is exact.
    (unsigned as u64 as u32) as i32
}

/// The generator of the reference: a state held as a JS number.
pub struct JsLcg {
    state: f64,
}

impl JsLcg {
    pub fn new(seed: f64) -> Self {
        JsLcg { state: seed }
    }

    /// The next value in [0, 1].
    pub fn next_f64(&mut self) -> f64 {
        let product = self.state * MULTIPLIER + INCREMENT;
        self.state = f64::from(to_int32(product) & MASK);
        self.state / DIVISOR
    }
}

/// The order `shuffleForEpoch(epoch)` produces for `len` examples: Fisher-Yates from the end over
/// the identity order, driven by a generator seeded with `seed + epoch` (a JS addition).
pub fn epoch_order(len: usize, seed: f64, epoch: f64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..len as u32).collect();
    let mut rng = JsLcg::new(seed + epoch);
    for i in (1..len).rev() {
        let j = (rng.next_f64() * (i as f64 + 1.0)).floor() as usize;
        // The generator can return exactly 1.0, which would make j == i + 1 in theory; JS would
        // then swap with `undefined`. Clamp to stay in bounds (1.0 needs state 2^31-1, which the
        // mask can produce), keeping every other case identical.
        let j = j.min(i);
        order.swap(i, j);
    }
    order
}

/// A SplitMix64 stream: the generator of the batch plan's own shuffles (the order of batches,
/// of packed rows). Integer-only, so every process and platform draws the same values.
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0), by the multiply-shift reduction.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fisher-Yates from the end.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_42_matches_the_documented_states() {
        let mut rng = JsLcg::new(42.0);
        let states: Vec<f64> = (0..4)
            .map(|_| {
                rng.next_f64();
                rng.state
            })
            .collect();
        assert_eq!(
            states,
            vec![1250496027.0, 1116302080.0, 1964818176.0, 1500480256.0]
        );
    }

    #[test]
    fn to_int32_follows_ecmascript() {
        assert_eq!(to_int32(f64::NAN), 0);
        assert_eq!(to_int32(f64::INFINITY), 0);
        assert_eq!(to_int32(4_294_967_296.0 + 5.0), 5);
        assert_eq!(to_int32(2_147_483_648.0), i32::MIN);
        assert_eq!(to_int32(-1.5), -1);
        assert_eq!(to_int32(-4_294_967_297.0), -1);
    }

    #[test]
    fn small_orders_are_permutations() {
        for n in 0..50 {
            let mut order = epoch_order(n, 42.0, 3.0);
            order.sort_unstable();
            assert_eq!(order, (0..n as u32).collect::<Vec<_>>());
        }
    }

    #[test]
    fn splitmix_is_fixed_and_shuffles_to_permutations() {
        // First output of SplitMix64 seeded with 0, as published with the algorithm.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        let mut items: Vec<u32> = (0..100).collect();
        SplitMix64::new(7).shuffle(&mut items);
        assert_ne!(items, (0..100).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..100).collect::<Vec<_>>());
    }
}
