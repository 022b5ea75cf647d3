//! Notification texts mutated at random: decoding and hearing never panic,
//! and whatever decodes is delivered intact or counted.

use switchyard_plugin_pgbus::{Engine, Header, notification};

use crate::support::*;

/// xorshift64: the test needs repeatable noise, not quality.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn samples() -> Vec<String> {
    let envelope = notification::Envelope::new(
        "jobs.7.progress",
        Some("_INBOX.t.1"),
        &[Header::new("a", "b"), Header::new("c", "\u{e9}")],
    );
    vec![
        envelope.inline(&binary(100)),
        envelope.inline(b""),
        notification::marker(12, &envelope.marker_tail()),
        notification::Envelope::new("jobs.x", None, &[]).inline(b"x"),
    ]
}

#[test]
fn mutated_notifications_never_panic() {
    const ALPHABET: &[u8] = b" ms0123456789:,=+/._*>aZ\n";
    let mut noise = Noise(0x5eed);
    let mut e: Engine = ready(r#"{"roots": []}"#);
    e.subscribe(1, "jobs.*.progress", None, 0).unwrap();
    e.subscribe(2, "*", None, 0).unwrap();
    for round in 0..20_000u64 {
        let samples = samples();
        let mut bytes = samples[noise.below(samples.len())].clone().into_bytes();
        for _ in 0..1 + noise.below(4) {
            match noise.below(3) {
                0 if !bytes.is_empty() => {
                    let i = noise.below(bytes.len());
                    bytes[i] = ALPHABET[noise.below(ALPHABET.len())];
                }
                1 if !bytes.is_empty() => {
                    let i = noise.below(bytes.len());
                    bytes.truncate(i);
                }
                _ => {
                    let i = noise.below(bytes.len() + 1);
                    bytes.insert(i, ALPHABET[noise.below(ALPHABET.len())]);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let _ = notification::decode(&text);
        let out = e.notified(LISTENER, vec![heard(text)], 0, round);
        // Answer spill reads at once, sometimes with nothing.
        for q in queries(&out) {
            let answer = if round % 2 == 0 {
                rows(b"p")
            } else {
                Vec::new()
            };
            e.answered(q.id, Ok(answer), round);
        }
    }
    let c = e.counters();
    assert!(c.malformed > 0 && c.delivered > 0, "{c:?}");
}

#[test]
fn random_text_never_panics() {
    let mut noise = Noise(7);
    for _ in 0..20_000 {
        let len = noise.below(40);
        let text: String = (0..len)
            .map(|_| char::from_u32(noise.below(0x300) as u32).unwrap_or(' '))
            .collect();
        let _ = notification::decode(&text);
    }
}
