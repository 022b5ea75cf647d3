//! Who may start a link handshake on this replica. The link endpoint is
//! anonymous (the handshake is its authentication), so what a stranger can
//! hold is bounded: [`MAX_HANDSHAKES`] handshakes at once in all, at most
//! [`MAX_HANDSHAKES_PER_ADDRESS`] from one remote address (silent sockets
//! from one host cannot fill every slot and shut real peers out), and an
//! address that guessed the join token wrong more than [`FREE_JOIN_GUESSES`]
//! times waits before its next join is judged, the wait doubling from
//! [`FIRST_JOIN_BACKOFF`] to [`MAX_JOIN_BACKOFF`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most link handshakes a replica answers at once.
pub const MAX_HANDSHAKES: usize = 16;
/// The most handshakes in progress from one remote address: a cluster
/// dials two lanes, and one join besides is rare.
pub const MAX_HANDSHAKES_PER_ADDRESS: usize = 2;
/// Wrong join tokens an address may send before it has to wait: an
/// operator's typo or a rotated token costs nothing.
pub const FREE_JOIN_GUESSES: u32 = 3;
/// The first wait after the free guesses; it doubles with each wrong guess.
pub const FIRST_JOIN_BACKOFF: Duration = Duration::from_secs(5);
/// The longest wait between two join guesses from one address.
pub const MAX_JOIN_BACKOFF: Duration = Duration::from_secs(300);
/// Addresses whose wrong guesses are remembered; beyond it the oldest
/// waits are forgotten first (the map stays bounded whatever arrives).
const MAX_TRACKED: usize = 4096;

/// Why a handshake was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Every handshake slot of the replica is taken.
    Replica,
    /// The remote address holds its share already.
    Address,
}

#[derive(Default)]
struct State {
    open: HashMap<IpAddr, usize>,
    guesses: HashMap<IpAddr, Guesses>,
}

struct Guesses {
    wrong: u32,
    until: Instant,
}

/// The replica's handshake admission.
pub struct Gate {
    slots: Arc<Semaphore>,
    state: Arc<Mutex<State>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            slots: Arc::new(Semaphore::new(MAX_HANDSHAKES)),
            state: Default::default(),
        }
    }
}

/// A handshake's place, held until it ends (dropped).
pub struct HandshakePermit {
    _slot: OwnedSemaphorePermit,
    address: Option<IpAddr>,
    state: Arc<Mutex<State>>,
}

impl HandshakePermit {
    /// The remote address the handshake comes from, when known.
    pub fn address(&self) -> Option<IpAddr> {
        self.address
    }
}

impl Drop for HandshakePermit {
    fn drop(&mut self) {
        let Some(address) = self.address else { return };
        let mut state = self.state.lock().expect("gate lock");
        if let Some(open) = state.open.get_mut(&address) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                state.open.remove(&address);
            }
        }
    }
}

impl Gate {
    /// A place for a handshake from `address` (`None`: unknown, counted
    /// against the replica's slots only).
    pub fn enter(&self, address: Option<IpAddr>) -> Result<HandshakePermit, Busy> {
        let mut state = self.state.lock().expect("gate lock");
        if let Some(address) = address
            && state.open.get(&address).copied().unwrap_or(0) >= MAX_HANDSHAKES_PER_ADDRESS
        {
            return Err(Busy::Address);
        }
        let slot = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Busy::Replica)?;
        if let Some(address) = address {
            *state.open.entry(address).or_default() += 1;
        }
        Ok(HandshakePermit {
            _slot: slot,
            address,
            state: self.state.clone(),
        })
    }

    /// How long `address` must still wait before its next join guess is
    /// judged; `None` when it may go ahead.
    pub fn join_wait(&self, address: Option<IpAddr>) -> Option<Duration> {
        let address = address?;
        let state = self.state.lock().expect("gate lock");
        let guesses = state.guesses.get(&address)?;
        guesses.until.checked_duration_since(Instant::now())
    }

    /// `address` sent a wrong join token.
    pub fn wrong_guess(&self, address: Option<IpAddr>) {
        let Some(address) = address else { return };
        let mut state = self.state.lock().expect("gate lock");
        if state.guesses.len() >= MAX_TRACKED && !state.guesses.contains_key(&address) {
            let now = Instant::now();
            state.guesses.retain(|_, g| g.until > now);
            if state.guesses.len() >= MAX_TRACKED
                && let Some(oldest) = state
                    .guesses
                    .iter()
                    .min_by_key(|(_, g)| g.until)
                    .map(|(a, _)| *a)
            {
                state.guesses.remove(&oldest);
            }
        }
        let guesses = state.guesses.entry(address).or_insert(Guesses {
            wrong: 0,
            until: Instant::now(),
        });
        guesses.wrong = guesses.wrong.saturating_add(1);
        guesses.until = Instant::now() + backoff(guesses.wrong);
    }

    /// `address` joined: its wrong guesses are forgotten.
    pub fn right_guess(&self, address: Option<IpAddr>) {
        if let Some(address) = address {
            self.state
                .lock()
                .expect("gate lock")
                .guesses
                .remove(&address);
        }
    }
}

/// The wait after the `wrong`th wrong guess: none for the free ones.
fn backoff(wrong: u32) -> Duration {
    match wrong.checked_sub(FREE_JOIN_GUESSES) {
        None | Some(0) => Duration::ZERO,
        Some(over) => FIRST_JOIN_BACKOFF
            .saturating_mul(1u32 << (over - 1).min(16))
            .min(MAX_JOIN_BACKOFF),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn one_address_holds_its_share_and_gets_it_back_when_a_handshake_ends() {
        let gate = Gate::default();
        let first = gate.enter(local(2)).unwrap();
        let _second = gate.enter(local(2)).unwrap();
        assert_eq!(gate.enter(local(2)).err(), Some(Busy::Address));
        // Another address is not affected.
        let _other = gate.enter(local(3)).unwrap();
        drop(first);
        assert!(gate.enter(local(2)).is_ok());
    }

    #[test]
    fn the_replica_bound_holds_across_addresses() {
        let gate = Gate::default();
        let held: Vec<_> = (0..MAX_HANDSHAKES as u8)
            .map(|i| gate.enter(local(10 + i)).unwrap())
            .collect();
        assert_eq!(gate.enter(local(200)).err(), Some(Busy::Replica));
        drop(held);
        assert!(gate.enter(local(200)).is_ok());
    }

    #[test]
    fn wrong_guesses_past_the_free_ones_wait_longer_each_time() {
        let gate = Gate::default();
        for _ in 0..FREE_JOIN_GUESSES {
            gate.wrong_guess(local(2));
            assert_eq!(gate.join_wait(local(2)), None);
        }
        gate.wrong_guess(local(2));
        let first = gate.join_wait(local(2)).expect("a wait");
        assert!(first <= FIRST_JOIN_BACKOFF);
        gate.wrong_guess(local(2));
        assert!(gate.join_wait(local(2)).expect("a wait") > first);
        assert_eq!(gate.join_wait(local(3)), None);
        gate.right_guess(local(2));
        assert_eq!(gate.join_wait(local(2)), None);
        assert_eq!(backoff(FREE_JOIN_GUESSES + 40), MAX_JOIN_BACKOFF);
    }
}
