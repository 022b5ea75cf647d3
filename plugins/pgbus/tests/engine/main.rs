//! The engine driven as a host would drive it: connections opening and
//! closing, queries answered, notifications heard, the timer firing.

mod claims;
mod delivery;
mod fuzz;
mod held;
mod publish;
mod queue;
mod reconnect;
mod requests;
mod retention;
mod support;
