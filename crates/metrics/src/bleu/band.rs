//! What a corpus BLEU score roughly means, as the course slides (after Google Cloud
//! Translation's guide) read it. A rule of thumb for one language pair and test set, not a
//! comparison across them.

/// The band of `score` (0-100): its range and reading.
pub fn interpretation(score: f64) -> &'static str {
    match score {
        s if s < 10.0 => "< 10: almost useless",
        s if s < 20.0 => "10-19: hard to get the gist",
        s if s < 30.0 => "20-29: the gist is clear, but with significant grammatical errors",
        s if s < 40.0 => "30-40: understandable to good translations",
        s if s < 50.0 => "40-50: high-quality translations",
        s if s < 60.0 => "50-60: very high quality, adequate and fluent translations",
        _ => "> 60: quality often better than human",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_begin_at_their_lower_bound() {
        let bands = [
            (0.0, "< 10: almost useless"),
            (10.0, "10-19: hard to get the gist"),
            (20.0, "20-29: the gist is clear, but with significant grammatical errors"),
            (30.0, "30-40: understandable to good translations"),
            (40.0, "40-50: high-quality translations"),
            (50.0, "50-60: very high quality, adequate and fluent translations"),
            (60.0, "> 60: quality often better than human"),
        ];
        for (i, &(low, band)) in bands.iter().enumerate() {
            assert_eq!(interpretation(low), band, "{low}");
            assert_eq!(interpretation(low + 5.0), band, "{}", low + 5.0);
            if i > 0 {
                assert_eq!(interpretation(low - 0.01), bands[i - 1].1, "{}", low - 0.01);
            }
        }
    }
}
